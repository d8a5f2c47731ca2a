// The story as a tree: every node, long runs of single-child nodes folded into one row, the path to
// the leaf at the left edge with the other branches and swipes as indented stubs under their fork,
// saves, stars and hidden nodes marked, and any node one click from checkout. Built with loops (no
// recursion: a 10,000-turn chain is 20,000 nodes deep) and rendered as one flat list of rows.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { register, t } from "./i18n.js";
import { all, get, request } from "./api.js";
import { Loading, Problem, attempt, useLoad } from "./ui.js";

register({
  en: {
    tree_title: "Story tree",
    tree_phase_writing: "being written", tree_phase_waiting: "waiting for an answer", tree_phase_stopped: "stopped",
    tree_phase_withdrawn: "withdrawn",
    tree_summary: "{nodes} nodes · {forks} forks · leaf at turn {turn}",
    tree_to_leaf: "Go to the leaf",
    tree_collapse_all: "Collapse all",
    tree_refresh: "Refresh",
    tree_kind_user: "You",
    tree_kind_reply: "Reply",
    tree_kind_greeting: "Greeting",
    tree_turn: "turn {n}",
    tree_chain: "Turns {a}–{b} ({n} nodes)",
    tree_expand: "Expand",
    tree_collapse: "Collapse",
    tree_expand_chain: "Expand turns {a}–{b}",
    tree_collapse_chain: "Collapse turns {a}–{b}",
    tree_more: "Show {n} more ({left} left)",
    tree_branch: "Branch",
    tree_branch_size: "{n} nodes",
    tree_branch_one: "1 node",
    tree_expand_branch: "Expand the branch from turn {n}",
    tree_collapse_branch: "Collapse the branch from turn {n}",
    tree_checkout: "Go here",
    tree_checkout_label: "Check out turn {n} ({kind})",
    tree_checkout_end: "Go to its end",
    tree_checkout_end_label: "Check out the end of this branch (turn {n})",
    tree_checkout_last: "Go to turn {n}",
    tree_checkout_last_label: "Check out turn {n}, the last of these",
    tree_here: "Current",
    tree_leaf: "leaf",
    tree_on_path: "on the path",
    tree_save: "save: {name}",
    tree_current_save: "current save: {name}",
    tree_starred: "★ starred",
    tree_hidden: "hidden",
    tree_hidden_n: "{n} hidden",
    tree_revisions: "edited ×{n}",
    tree_empty: "(empty)",
    tree_keys: "↑/↓ move between rows.",
  },
  zh: {
    tree_phase_writing: "正在写", tree_phase_waiting: "等待回答", tree_phase_stopped: "已停止", tree_phase_withdrawn: "已撤回",
    tree_title: "故事树",
    tree_summary: "{nodes} 个节点 · {forks} 个分叉 · 当前叶子在第 {turn} 轮",
    tree_to_leaf: "跳到叶子",
    tree_collapse_all: "全部折叠",
    tree_refresh: "刷新",
    tree_kind_user: "你",
    tree_kind_reply: "回复",
    tree_kind_greeting: "开场白",
    tree_turn: "第 {n} 轮",
    tree_chain: "第 {a}–{b} 轮（{n} 个节点）",
    tree_expand: "展开",
    tree_collapse: "折叠",
    tree_expand_chain: "展开第 {a}–{b} 轮",
    tree_collapse_chain: "折叠第 {a}–{b} 轮",
    tree_more: "再显示 {n} 个（还剩 {left} 个）",
    tree_branch: "分支",
    tree_branch_size: "{n} 个节点",
    tree_branch_one: "1 个节点",
    tree_expand_branch: "展开从第 {n} 轮起的分支",
    tree_collapse_branch: "折叠从第 {n} 轮起的分支",
    tree_checkout: "切到这里",
    tree_checkout_label: "切到第 {n} 轮（{kind}）",
    tree_checkout_end: "切到分支末端",
    tree_checkout_end_label: "切到这个分支的末端（第 {n} 轮）",
    tree_checkout_last: "切到第 {n} 轮",
    tree_checkout_last_label: "切到第 {n} 轮，这一段的最后一个节点",
    tree_here: "当前",
    tree_leaf: "叶子",
    tree_on_path: "在当前路径上",
    tree_save: "存档：{name}",
    tree_current_save: "当前存档：{name}",
    tree_starred: "★ 已加星",
    tree_hidden: "已隐藏",
    tree_hidden_n: "{n} 个已隐藏",
    tree_revisions: "改过 {n} 次",
    tree_empty: "（空）",
    tree_keys: "↑/↓ 在行之间移动。",
  },
});

const MIN_CHAIN = 3; // shorter runs are shown node by node
const PAGE = 200; // nodes an expanded run shows at a time

// Indexes, children, subtree sizes and the leaf's path, all by position in `nodes`.
function buildModel(nodes, leafId, saves) {
  const count = nodes.length;
  const index = new Map();
  for (let i = 0; i < count; i++) index.set(nodes[i].id, i);
  const parent = new Int32Array(count).fill(-1);
  const kids = new Array(count);
  const roots = [];
  for (let i = 0; i < count; i++) {
    const p = index.get(nodes[i].parent_id);
    if (p === undefined) roots.push(i);
    else {
      parent[i] = p;
      (kids[p] || (kids[p] = [])).push(i); // oldest first: the tree comes in the order it was written
    }
  }
  const order = roots.slice();
  for (let k = 0; k < order.length; k++) for (const c of kids[order[k]] || []) order.push(c);
  const size = new Int32Array(count).fill(1);
  const latest = new Int32Array(count); // the newest node of each subtree (nodes come oldest first)
  for (let i = 0; i < count; i++) latest[i] = i;
  for (let k = order.length - 1; k >= 0; k--) {
    const x = order[k];
    const p = parent[x];
    if (p < 0) continue;
    size[p] += size[x];
    if (latest[x] > latest[p]) latest[p] = latest[x];
  }
  const leaf = index.has(leafId) ? index.get(leafId) : -1;
  const onPath = new Uint8Array(count);
  // the child that continues a line: the one on the leaf's path, else the one written to last
  const cont = new Int32Array(count).fill(-1);
  for (let i = 0; i < count; i++) {
    for (const c of kids[i] || []) if (cont[i] < 0 || latest[c] > latest[cont[i]]) cont[i] = c;
  }
  for (let x = leaf; x >= 0; x = parent[x]) {
    onPath[x] = 1;
    if (parent[x] >= 0) cont[parent[x]] = x;
  }
  const saved = new Map();
  for (const line of saves?.worldlines || []) {
    for (const save of line.saves || []) {
      const at = index.get(save.node_id);
      if (at === undefined) continue;
      if (!saved.has(at)) saved.set(at, []);
      saved.get(at).push({ id: save.id, name: save.name, current: save.id === saves.current_save_id });
    }
  }
  let forks = 0;
  for (let i = 0; i < count; i++) if (kids[i] && kids[i].length > 1) forks++;
  roots.sort((a, b) => (nodes[b].parent_id === null) - (nodes[a].parent_id === null));
  return { nodes, index, parent, kids, roots, size, leaf, onPath, cont, saved, forks };
}

function childCount(model, i) {
  return model.kids[i] ? model.kids[i].length : 0;
}

// A node always shown on a row of its own, never folded into a run.
function standsOut(model, i) {
  return i === model.leaf || model.saved.has(i) || model.nodes[i].starred;
}

function tipOf(model, i) {
  let x = i;
  while (model.cont[x] >= 0) x = model.cont[x];
  return x;
}

function pushRun(model, run, indent, openRuns, out) {
  if (run.length < MIN_CHAIN) {
    for (const i of run) out.push({ type: "node", key: `n${i}`, at: i, indent });
    return;
  }
  const key = model.nodes[run[0]].id;
  const shown = openRuns.get(key) || 0;
  out.push({ type: "chain", key: `c${run[0]}`, id: key, run, indent, shown });
  if (!shown) return;
  const end = Math.min(run.length, shown);
  for (let k = 0; k < end; k++) out.push({ type: "node", key: `n${run[k]}`, at: run[k], indent, inRun: true });
  if (end < run.length) out.push({ type: "more", key: `m${run[0]}`, id: key, indent, shown, left: run.length - end });
}

// The rows on screen, in order: a work stack of lines and stubs instead of recursion.
function buildRows(model, openRuns, openStubs) {
  const out = [];
  const stack = [];
  for (let r = model.roots.length - 1; r >= 0; r--) stack.push({ line: true, at: model.roots[r], indent: 0 });
  while (stack.length) {
    const item = stack.pop();
    if (!item.line) {
      const id = model.nodes[item.at].id;
      const expanded = openStubs.has(id);
      out.push({ type: "stub", key: `s${item.at}`, id, at: item.at, indent: item.indent, expanded });
      if (expanded) stack.push({ line: true, at: item.at, indent: item.indent + 1 });
      continue;
    }
    let run = [];
    for (let x = item.at; x >= 0; ) {
      const n = childCount(model, x);
      if (n === 1 && !standsOut(model, x)) {
        run.push(x);
        x = model.kids[x][0];
        continue;
      }
      pushRun(model, run, item.indent, openRuns, out);
      run = [];
      out.push({ type: "node", key: `n${x}`, at: x, indent: item.indent });
      if (n > 1) {
        stack.push({ line: true, at: model.cont[x], indent: item.indent });
        const others = model.kids[x].filter((c) => c !== model.cont[x]);
        for (let k = others.length - 1; k >= 0; k--) stack.push({ line: false, at: others[k], indent: item.indent + 1 });
        break;
      }
      x = n === 1 ? model.kids[x][0] : -1;
    }
    pushRun(model, run, item.indent, openRuns, out);
  }
  return out;
}

function kindLabel(kind) {
  return t(`tree_kind_${kind}`);
}

// The preview on one line, "…" when the node's text goes on.
function oneLine(node) {
  const text = node.preview || "";
  const flat = text.replace(/\s+/g, " ").trim();
  if (!flat) return t("tree_empty");
  return node.chars > text.length ? flat + "…" : flat;
}

function Marks({ model, at }) {
  const node = model.nodes[at];
  const saves = model.saved.get(at) || [];
  return html`${at === model.leaf ? html`<span class="badge tree-mark-leaf">${t("tree_leaf")}</span>` : null}
    ${saves.map(
      (s) => html`<span class=${"badge tree-mark-save" + (s.current ? " current" : "")} key=${s.id}>
        ${t(s.current ? "tree_current_save" : "tree_save", { name: s.name })}</span>`,
    )}
    ${node.starred ? html`<span class="badge tree-mark-star">${t("tree_starred")}</span>` : null}
    ${node.hidden ? html`<span class="badge tree-mark-hidden">${t("tree_hidden")}</span>` : null}
    ${node.revisions > 0 ? html`<span class="badge">${t("tree_revisions", { n: node.revisions })}</span>` : null}
    ${node.phase !== "final" && node.phase !== "sealed" ? html`<span class="badge">${t(`tree_phase_${node.phase}`)}</span>` : null}`;
}

function Kind({ kind }) {
  return html`<span class=${`tree-kind tree-kind-${kind}`}>${kindLabel(kind)}</span>`;
}

function NodeRow({ model, row, busy, onCheckout }) {
  const node = model.nodes[row.at];
  const leaf = row.at === model.leaf;
  const label = t("tree_checkout_label", { n: node.turn, kind: kindLabel(node.kind) });
  return html`<div class="tree-line" data-testid=${leaf ? "tree-leaf" : null} aria-current=${leaf ? "true" : null}>
    <${Kind} kind=${node.kind} />
    <span class="tree-turn muted">${t("tree_turn", { n: node.turn })}</span>
    <span class="tree-preview" title=${node.preview}>${oneLine(node)}</span>
    <span class="tree-marks"><${Marks} model=${model} at=${row.at} /></span>
    <button class="tree-go" data-testid="tree-checkout" aria-label=${label} aria-disabled=${busy || leaf ? "true" : null}
      onClick=${() => !leaf && onCheckout(node.id)}>${leaf ? t("tree_here") : t("tree_checkout")}</button>
  </div>`;
}

function hiddenIn(model, run) {
  let n = 0;
  for (const i of run) if (model.nodes[i].hidden) n++;
  return n;
}

function ChainRow({ model, row, busy, onToggle, onCheckout }) {
  const first = model.nodes[row.run[0]];
  const last = model.nodes[row.run[row.run.length - 1]];
  const range = { a: first.turn, b: last.turn };
  const hidden = hiddenIn(model, row.run);
  return html`<div class="tree-line tree-chain">
    <button class="tree-toggle" aria-expanded=${row.shown > 0}
      aria-label=${t(row.shown ? "tree_collapse_chain" : "tree_expand_chain", range)}
      onClick=${() => onToggle(row.id, row.shown ? 0 : PAGE)}>${row.shown ? "▾" : "▸"}</button>
    <span class="tree-chain-head">${t("tree_chain", { ...range, n: row.run.length })}
      ${hidden ? html` <span class="badge tree-mark-hidden">${t("tree_hidden_n", { n: hidden })}</span>` : null}</span>
    <button class="tree-go" data-testid="tree-checkout" aria-disabled=${busy ? "true" : null}
      aria-label=${t("tree_checkout_last_label", { n: last.turn })}
      onClick=${() => onCheckout(last.id)}>${t("tree_checkout_last", { n: last.turn })}</button>
    <span class="tree-chain-ends">
      <span class="tree-preview" title=${first.preview}>${oneLine(first)}</span>
      <span class="tree-arrow" aria-hidden="true">…</span>
      <span class="tree-preview" title=${last.preview}>${oneLine(last)}</span>
    </span>
  </div>`;
}

function StubRow({ model, row, busy, onToggle, onCheckout }) {
  const node = model.nodes[row.at];
  const size = model.size[row.at];
  const tip = model.nodes[tipOf(model, row.at)];
  return html`<div class="tree-line tree-stub">
    ${size > 1
      ? html`<button class="tree-toggle" aria-expanded=${row.expanded}
          aria-label=${t(row.expanded ? "tree_collapse_branch" : "tree_expand_branch", { n: node.turn })}
          onClick=${() => onToggle(row.id)}>${row.expanded ? "▾" : "▸"}</button>`
      : html`<span class="tree-toggle-space" aria-hidden="true"></span>`}
    <${Kind} kind=${node.kind} />
    <span class="tree-preview" title=${node.preview}>${oneLine(node)}</span>
    <span class="tree-marks">
      <span class="badge">${size === 1 ? t("tree_branch_one") : t("tree_branch_size", { n: size })}</span>
      ${size === 1 ? html`<${Marks} model=${model} at=${row.at} />` : null}
    </span>
    ${size === 1
      ? html`<button class="tree-go" data-testid="tree-checkout" aria-disabled=${busy ? "true" : null}
          aria-label=${t("tree_checkout_label", { n: node.turn, kind: kindLabel(node.kind) })}
          onClick=${() => onCheckout(node.id)}>${t("tree_checkout")}</button>`
      : html`<button class="tree-go" data-testid="tree-checkout" aria-disabled=${busy ? "true" : null}
          aria-label=${t("tree_checkout_end_label", { n: tip.turn })}
          onClick=${() => onCheckout(tip.id)}>${t("tree_checkout_end")}</button>`}
  </div>`;
}

function MoreRow({ row, onToggle }) {
  const n = Math.min(PAGE, row.left);
  return html`<div class="tree-line tree-more">
    <button class="link" onClick=${() => onToggle(row.id, row.shown + PAGE)}>${t("tree_more", { n, left: row.left })}</button>
  </div>`;
}

function rowClass(model, row) {
  const names = ["tree-row", `tree-row-${row.type}`];
  const at = row.type === "chain" ? row.run[0] : row.at;
  if (at !== undefined && model.onPath[at]) names.push("on-path");
  if (row.type === "node" && row.at === model.leaf) names.push("is-leaf");
  if (row.inRun) names.push("in-run");
  if (row.type === "node" && model.nodes[row.at].hidden) names.push("is-hidden");
  return names.join(" ");
}

// ↑/↓ move the focus to the same kind of control in the row above or below.
function moveFocus(event) {
  if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
  const row = event.target.closest && event.target.closest(".tree-row");
  if (!row) return;
  const down = event.key === "ArrowDown";
  for (let next = down ? row.nextElementSibling : row.previousElementSibling; next; ) {
    const target = next.querySelector("button:not(:disabled)");
    if (target) {
      event.preventDefault();
      target.focus();
      return;
    }
    next = down ? next.nextElementSibling : next.previousElementSibling;
  }
}

async function loadTree(storyId) {
  const { page, found } = await all(`/stories/${storyId}/tree`, { limit: 5000 }, "nodes");
  return { nodes: found, leafId: page.leaf_id };
}

const NO_SAVES = { current_save_id: null, worldlines: [] };

export function Tree({ story, reload }) {
  const [tick, setTick] = useState(0);
  const [data, error, retry] = useLoad(() => loadTree(story.id), [story.id, tick]);
  // (a story without saves is not asked for them; the current save follows the leaf)
  const [saves, savesError, retrySaves] = useLoad(
    () => (story.saves ? get(`/stories/${story.id}/saves`) : Promise.resolve(NO_SAVES)),
    [story.id, story.saves, story.leaf_id, tick],
  );
  const [openRuns, setOpenRuns] = useState(() => new Map());
  const [openStubs, setOpenStubs] = useState(() => new Set());
  const [busy, setBusy] = useState(false); // a checkout on its way: the others wait (their buttons keep the focus)
  const moving = useRef(false);
  const refreshedFor = useRef(null);
  const leafId = story.leaf_id || data?.leafId;
  const model = useMemo(() => data && saves && buildModel(data.nodes, leafId, saves), [data, leafId, saves]);
  const rows = useMemo(() => (model ? buildRows(model, openRuns, openStubs) : []), [model, openRuns, openStubs]);

  useEffect(() => {
    // the leaf moved to a node written since the tree was read (a turn played elsewhere): read it again
    if (model && model.leaf < 0 && refreshedFor.current !== leafId) {
      refreshedFor.current = leafId;
      setTick((n) => n + 1);
    }
  }, [model, leafId]);

  if (error || savesError) return html`<${Problem} error=${error || savesError} onRetry=${error ? retry : retrySaves} />`;
  if (!model) return html`<${Loading} />`;

  const toggleRun = (id, shown) =>
    setOpenRuns((before) => {
      const after = new Map(before);
      if (shown) after.set(id, shown);
      else after.delete(id);
      return after;
    });
  const toggleStub = (id) =>
    setOpenStubs((before) => {
      const after = new Set(before);
      if (after.has(id)) after.delete(id);
      else after.add(id);
      return after;
    });
  const checkout = async (nodeId) => {
    if (moving.current) return;
    moving.current = true;
    setBusy(true);
    const done = await attempt(() => request("POST", `/stories/${story.id}/checkout`, { body: { node_id: nodeId } }));
    moving.current = false;
    setBusy(false);
    if (done) reload();
  };
  const toLeaf = () => {
    const leaf = document.querySelector("[data-testid=tree-leaf]");
    if (!leaf) return;
    leaf.scrollIntoView({ block: "center" });
    const button = leaf.querySelector("button");
    if (button) button.focus({ preventScroll: true });
  };
  const collapseAll = () => {
    setOpenRuns(new Map());
    setOpenStubs(new Set());
  };
  const leafTurn = model.leaf >= 0 ? model.nodes[model.leaf].turn : "?";

  return html`<section class="tree-view" aria-labelledby="tree-title">
    <div class="tree-bar row">
      <h2 id="tree-title">${t("tree_title")}</h2>
      <span class="muted">${t("tree_summary", { nodes: model.nodes.length, forks: model.forks, turn: leafTurn })}</span>
      <span class="grow"></span>
      <button onClick=${toLeaf}>${t("tree_to_leaf")}</button>
      <button onClick=${collapseAll}>${t("tree_collapse_all")}</button>
      <button onClick=${() => setTick((n) => n + 1)}>${t("tree_refresh")}</button>
    </div>
    <p class="muted tree-keys">${t("tree_keys")}</p>
    <ol class="tree" data-testid="tree" onKeyDown=${moveFocus}>
      ${rows.map(
        (row) => html`<li class=${rowClass(model, row)} key=${row.key} data-testid="tree-row"
          style=${{ "--indent": row.indent }}>
          ${row.type === "node"
            ? html`<${NodeRow} model=${model} row=${row} busy=${busy} onCheckout=${checkout} />`
            : row.type === "chain"
              ? html`<${ChainRow} model=${model} row=${row} busy=${busy} onToggle=${toggleRun} onCheckout=${checkout} />`
              : row.type === "stub"
                ? html`<${StubRow} model=${model} row=${row} busy=${busy} onToggle=${toggleStub} onCheckout=${checkout} />`
                : html`<${MoreRow} row=${row} onToggle=${toggleRun} />`}
        </li>`,
      )}
    </ol>
  </section>`;
}
