// A story's background work (its Jobs tab): its jobs by status and each job (kind, status, attempts, the
// skip reason or last error, when), polled every 3 s while any is pending, retrying or running; then the
// cost ledger: the story's model calls per purpose and model (calls, tokens, latency). A failed or skipped job can be done again.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { register, t } from "./i18n.js";
import { get, request } from "./api.js";
import { attempt, Loading, Problem, short } from "./ui.js";

register({
  en: {
    jobs_title: "Background work",
    jobs_refresh: "Refresh",
    jobs_settled: "all settled",
    jobs_busy: "working… (refreshing every 3 s)",
    jobs_none: "No background job for this story yet.",
    jobs_show: "Show",
    jobs_all: "all",
    jobs_kind: "Kind",
    jobs_node: "Node",
    jobs_status: "Status",
    jobs_attempts: "Failed attempts",
    jobs_detail: "Reason / last error",
    jobs_next: "Next run",
    jobs_created: "Created",
    jobs_updated: "Updated",
    jobs_more: "Shown: the oldest {n} jobs, and the first {n} of those pending, running, retrying or failed.",
    jobs_retry: "Do it again",
    jobs_retry_all: "Do every failed job shown again (oldest first: a path's scene patches in path order)",
    jobs_again: "Again",
    jobs_retry_one: "Do the {kind} job of node {node} again",
    jobs_retry_hint: "A failed or skipped job can be done again: it is due at once, its attempts counted afresh.",
    jobs_compact_hint: "Compact now is in the Memory tab.",
    jobs_status_pending: "pending",
    jobs_status_running: "running",
    jobs_status_retrying: "retrying",
    jobs_status_done: "done",
    jobs_status_skipped: "skipped",
    jobs_status_failed: "failed",
    jobs_kind_scribe: "scribe",
    jobs_kind_compact: "compact",
    jobs_costs: "Cost ledger",
    jobs_costs_none: "No model call recorded for this story yet.",
    jobs_purpose: "Purpose",
    jobs_model: "Model",
    jobs_calls: "Calls",
    jobs_ok: "OK",
    jobs_prompt: "Prompt tokens",
    jobs_completion: "Completion tokens",
    jobs_latency: "Latency (total)",
    jobs_latency_avg: "Latency (per call)",
    jobs_total: "Total",
  },
  zh: {
    jobs_title: "后台任务",
    jobs_refresh: "刷新",
    jobs_settled: "全部完成",
    jobs_busy: "进行中…（每 3 秒刷新）",
    jobs_none: "这个故事还没有后台任务。",
    jobs_show: "显示",
    jobs_all: "全部",
    jobs_kind: "类型",
    jobs_node: "节点",
    jobs_status: "状态",
    jobs_attempts: "失败次数",
    jobs_detail: "原因 / 最近的错误",
    jobs_next: "下次运行",
    jobs_created: "创建于",
    jobs_updated: "更新于",
    jobs_more: "显示：最早的 {n} 个任务，以及等待中、运行中、待重试或失败的前 {n} 个任务。",
    jobs_retry: "重做",
    jobs_retry_all: "重做这里列出的所有失败任务（从最早的开始：场景补丁按路径顺序）",
    jobs_again: "重做",
    jobs_retry_one: "重做节点 {node} 的{kind}任务",
    jobs_retry_hint: "失败或跳过的任务可以重做：立即排队，失败次数从零算起。",
    jobs_compact_hint: "“立即压缩”在“记忆”标签页。",
    jobs_status_pending: "等待中",
    jobs_status_running: "运行中",
    jobs_status_retrying: "待重试",
    jobs_status_done: "完成",
    jobs_status_skipped: "跳过",
    jobs_status_failed: "失败",
    jobs_kind_scribe: "场记",
    jobs_kind_compact: "压缩",
    jobs_costs: "调用开销",
    jobs_costs_none: "这个故事还没有模型调用记录。",
    jobs_purpose: "用途",
    jobs_model: "模型",
    jobs_calls: "调用次数",
    jobs_ok: "成功",
    jobs_prompt: "提示词 token",
    jobs_completion: "生成 token",
    jobs_latency: "耗时（合计）",
    jobs_latency_avg: "耗时（每次）",
    jobs_total: "合计",
  },
});

const STATUSES = ["running", "pending", "retrying", "failed", "done", "skipped"];
const LIMIT = 100;
const POLL_MS = 3000;
const OPEN = "pending,running,retrying,failed";
const RETRIED = ["failed", "skipped"]; // what POST /v1/jobs/{id}/retry does again

async function loadAll(storyId) {
  const [summary, list, open, costs] = await Promise.all([
    get(`/stories/${storyId}/jobs`),
    get("/jobs", { story_id: storyId, limit: LIMIT }),
    get("/jobs", { story_id: storyId, limit: LIMIT, status: OPEN }),
    get(`/stories/${storyId}/costs`),
  ]);
  // The list runs oldest first: the jobs still due or failed are asked for apart, so none is left out.
  const byId = new Map(list.items.map((j) => [j.id, j]));
  for (const job of open.items) byId.set(job.id, job);
  return { summary, jobs: [...byId.values()], more: Boolean(list.next_cursor), costs };
}

function when(stamp) {
  return stamp ? new Date(stamp).toLocaleString(undefined, { dateStyle: "short", timeStyle: "short" }) : "";
}

function ms(value) {
  return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${Math.round(value)} ms`;
}

function number(value) {
  return Number(value).toLocaleString();
}

export function Jobs({ story }) {
  const [state, setState] = useState({ data: null, error: null });
  const [busy, setBusy] = useState(false);
  const [filter, setFilter] = useState("all");
  const live = useRef(true);
  const refresh = useCallback(async () => {
    setBusy(true);
    try {
      const data = await loadAll(story.id);
      if (live.current) setState({ data, error: null });
    } catch (error) {
      if (live.current) setState((old) => ({ data: old.data, error }));
    } finally {
      if (live.current) setBusy(false);
    }
  }, [story.id]);
  useEffect(() => {
    live.current = true;
    refresh();
    return () => {
      live.current = false;
    };
  }, [refresh]);
  const data = state.data;
  const working = Boolean(data && !data.summary.settled);
  useEffect(() => {
    if (!working) return undefined;
    const timer = setInterval(refresh, POLL_MS);
    return () => clearInterval(timer);
  }, [working, refresh]);

  const [retrying, setRetrying] = useState(null); // the job whose retry is in flight
  const retry = async (job) => {
    setRetrying(job.id);
    const done = await attempt(() => request("POST", `/jobs/${job.id}/retry`));
    setRetrying(null);
    if (done) refresh();
  };
  const retryAll = async () => {
    const failed = data.jobs.filter((j) => j.status === "failed").sort((a, b) => a.seq - b.seq);
    setRetrying("all");
    for (const job of failed) if (!(await attempt(() => request("POST", `/jobs/${job.id}/retry`)))) break;
    setRetrying(null);
    refresh();
  };

  return html`<div class="jobs" data-testid="jobs">
    <div class="row">
      <h2 class="grow">${t("jobs_title")}</h2>
      <button type="button" onClick=${refresh} disabled=${busy} data-testid="jobs-refresh">${t("jobs_refresh")}</button>
    </div>
    <${Problem} error=${state.error} onRetry=${refresh} />
    ${data
      ? html`<${Counts} summary=${data.summary} filter=${filter} setFilter=${setFilter} />
          ${data.jobs.filter((j) => j.status === "failed").length > 1
            ? html`<button type="button" data-testid="jobs-retry-all" disabled=${retrying !== null} onClick=${retryAll}>${t("jobs_retry_all")}</button>`
            : null}
          <${JobTable} jobs=${data.jobs} more=${data.more} filter=${filter} onRetry=${retry} retrying=${retrying} />
          <${Costs} costs=${data.costs} />`
      : state.error
        ? null
        : html`<${Loading} />`}
  </div>`;
}

function Counts({ summary, filter, setFilter }) {
  return html`<div class="row jobs-counts" data-testid="jobs-counts">
    <span class=${summary.settled ? "badge jobs-settled" : "badge jobs-working"} data-testid="jobs-settled">
      ${summary.settled ? t("jobs_settled") : t("jobs_busy")}
    </span>
    ${STATUSES.map(
      (s) => html`<span key=${s} class=${summary.counts[s] ? `badge jobs-status jobs-${s}` : "badge"} data-testid=${`jobs-count-${s}`}>
        ${t(`jobs_status_${s}`)} ${summary.counts[s] || 0}
      </span>`,
    )}
    <span class="grow"></span>
    <label class="jobs-filter">
      ${t("jobs_show")}${" "}
      <select value=${filter} onChange=${(e) => setFilter(e.target.value)} data-testid="jobs-filter">
        <option value="all">${t("jobs_all")}</option>
        ${STATUSES.map((s) => html`<option value=${s}>${t(`jobs_status_${s}`)}</option>`)}
      </select>
    </label>
  </div>`;
}

function JobTable({ jobs, more, filter, onRetry, retrying }) {
  const shown = jobs.filter((j) => filter === "all" || j.status === filter).sort((a, b) => b.seq - a.seq);
  const failed = jobs.some((j) => RETRIED.includes(j.status));
  if (jobs.length === 0) return html`<p class="muted">${t("jobs_none")}</p>`;
  return html`<div class="jobs-scroll">
      <table class="jobs-table" data-testid="jobs-table">
        <thead>
          <tr>
            <th>${t("jobs_kind")}</th><th>${t("jobs_status")}</th><th>${t("jobs_attempts")}</th>
            <th>${t("jobs_detail")}</th><th>${t("jobs_node")}</th><th>${t("jobs_next")}</th>
            <th>${t("jobs_created")}</th><th>${t("jobs_updated")}</th><th>${t("jobs_again")}</th>
          </tr>
        </thead>
        <tbody>
          ${shown.map(
            (j) => html`<tr key=${j.id} class=${`jobs-row jobs-${j.status}`} data-testid="jobs-row">
              <td>${t(`jobs_kind_${j.kind}`)}</td>
              <td><span class=${`badge jobs-status jobs-${j.status}`}>${t(`jobs_status_${j.status}`)}</span></td>
              <td class="jobs-num">${j.attempts}</td>
              <td class="jobs-detail">${j.detail}${j.status === "failed" && j.kind === "compact"
                ? html` <a href=${`#/stories/${j.story_id}/memory`}>${t("jobs_compact_hint")}</a>`
                : null}</td>
              <td class="mono" title=${j.node_id}>${short(j.node_id)}</td>
              <td>${when(j.next_at)}</td>
              <td>${when(j.created_at)}</td>
              <td>${when(j.updated_at)}</td>
              <td>${RETRIED.includes(j.status)
                ? html`<button type="button" data-testid="jobs-retry" disabled=${retrying !== null} aria-label=${t("jobs_retry_one", { kind: t(`jobs_kind_${j.kind}`), node: short(j.node_id) })}
                    onClick=${() => onRetry(j)}>${t("jobs_retry")}</button>`
                : null}</td>
            </tr>`,
          )}
        </tbody>
      </table>
    </div>
    ${more ? html`<p class="muted">${t("jobs_more", { n: LIMIT })}</p>` : null}
    ${failed ? html`<p class="muted">${t("jobs_retry_hint")}</p>` : null}`;
}

function Costs({ costs }) {
  const latency = costs.lines.reduce((sum, line) => sum + line.latency_ms, 0);
  const ok = costs.lines.reduce((sum, line) => sum + line.ok, 0);
  return html`<h2>${t("jobs_costs")}</h2>
    ${costs.lines.length === 0
      ? html`<p class="muted">${t("jobs_costs_none")}</p>`
      : html`<div class="jobs-scroll">
          <table class="jobs-table jobs-costs" data-testid="jobs-costs">
            <thead>
              <tr>
                <th>${t("jobs_purpose")}</th><th>${t("jobs_model")}</th><th class="jobs-num">${t("jobs_calls")}</th>
                <th class="jobs-num">${t("jobs_ok")}</th><th class="jobs-num">${t("jobs_prompt")}</th>
                <th class="jobs-num">${t("jobs_completion")}</th><th class="jobs-num">${t("jobs_latency")}</th>
                <th class="jobs-num">${t("jobs_latency_avg")}</th>
              </tr>
            </thead>
            <tbody>
              ${costs.lines.map(
                (line) => html`<tr key=${`${line.purpose}/${line.model}`} data-testid="jobs-cost-row">
                  <td>${line.purpose}</td><td class="mono">${line.model}</td>
                  <td class="jobs-num">${number(line.calls)}</td><td class="jobs-num">${number(line.ok)}</td>
                  <td class="jobs-num">${number(line.prompt_tokens)}</td>
                  <td class="jobs-num">${number(line.completion_tokens)}</td>
                  <td class="jobs-num">${ms(line.latency_ms)}</td>
                  <td class="jobs-num">${line.calls ? ms(line.latency_ms / line.calls) : ""}</td>
                </tr>`,
              )}
            </tbody>
            <tfoot>
              <tr>
                <th colspan="2">${t("jobs_total")}</th>
                <th class="jobs-num">${number(costs.calls)}</th><th class="jobs-num">${number(ok)}</th>
                <th class="jobs-num">${number(costs.prompt_tokens)}</th>
                <th class="jobs-num">${number(costs.completion_tokens)}</th>
                <th class="jobs-num">${ms(latency)}</th>
                <th class="jobs-num">${costs.calls ? ms(latency / costs.calls) : ""}</th>
              </tr>
            </tfoot>
          </table>
        </div>`}`;
}
