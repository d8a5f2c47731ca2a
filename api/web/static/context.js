// The context for the next turn, explained: every block of what the model will be given, coloured
// by its layer, on a bar of the budget; why it is there; the nodes it stands for; recall's scores.
import { useState } from "preact/hooks";
import { html } from "./html.js";
import { register, t } from "./i18n.js";
import { get } from "./api.js";
import { attempt, Loading, Problem, short, useLoad } from "./ui.js";

const LAYERS = {
  system: "system", instructions: "instructions", reanchor: "instructions", lore: "lore", lore_in_chat: "lore", resident: "memory", memory: "memory",
  digest: "digest", episode: "episode", anchors: "anchors", recall: "recall", verbatim: "verbatim",
  greeting: "greeting", user: "verbatim", prelude: "memory", scene: "scene", roster: "scene", cut: "cut", hidden: "cut",
  "client block": "client", "client after": "client", prefill: "client",
};
const layer = (what) => LAYERS[what] || (what.startsWith("client") ? "client" : "system");

register({
  en: {
    context_tokens: "{tokens} of {budget} tokens",
    context_cut: "left out by the budget: {turns} turns ({nodes} nodes)",
    context_blocks: "Blocks",
    context_messages: "Messages as sent",
    context_show_messages: "Show the messages",
    context_nodes: "Nodes it stands for",
    context_show_nodes: "Show them",
    context_kind_user: "user", context_kind_reply: "reply", context_kind_greeting: "greeting",
    context_covers: "depths {a}–{b}",
    context_scores: "recall scores",
    context_lore: "lore entries",
    context_lore_left_out: "left out",
    context_lore_sticky: "sticky",
    context_memory: "card memory",
    context_free: "free",
    context_refresh: "Refresh",
    context_counter: "counted by {name}",
    layer_system: "system", layer_instructions: "instructions", layer_lore: "lore", layer_memory: "card memory",
    layer_digest: "digest", layer_episode: "episodes", layer_anchors: "anchors", layer_recall: "recall",
    layer_verbatim: "verbatim window", layer_greeting: "greeting", layer_scene: "scene", layer_cut: "cut",
    layer_client: "client blocks",
  },
  zh: {
    context_tokens: "{tokens} / {budget} 个 token",
    context_cut: "因预算省去：{turns} 轮（{nodes} 个节点）",
    context_blocks: "各块",
    context_messages: "发送的消息",
    context_show_messages: "显示消息",
    context_nodes: "它代表的节点",
    context_show_nodes: "显示",
    context_kind_user: "用户", context_kind_reply: "回复", context_kind_greeting: "开场白",
    context_covers: "深度 {a}–{b}",
    context_scores: "召回分数",
    context_lore: "世界书条目",
    context_lore_left_out: "未放入",
    context_lore_sticky: "粘滞",
    context_memory: "角色卡记忆",
    context_free: "空余",
    context_refresh: "刷新",
    context_counter: "计数器：{name}",
    layer_system: "系统", layer_instructions: "指令", layer_lore: "世界书", layer_memory: "角色卡记忆",
    layer_digest: "总摘要", layer_episode: "分段摘要", layer_anchors: "锚点", layer_recall: "召回",
    layer_verbatim: "原文窗口", layer_greeting: "开场白", layer_scene: "场景", layer_cut: "省去",
    layer_client: "前端块",
  },
});

// The block's own text: its span of messages[message_index] (code points, as the API counts them).
function blockText(context, block) {
  if (block.message_index === null || block.message_index === undefined || !block.span) return "";
  const first = block.message_index;
  const last = block.end_message ?? first;
  const parts = [];
  for (let i = first; i <= last && i < context.messages.length; i++) {
    const chars = Array.from(context.messages[i].content);
    const start = i === first ? block.span[0] : 0;
    const stop = i === last ? block.span[1] : chars.length;
    parts.push(chars.slice(start, stop).join(""));
  }
  return parts.join("\n\n");
}

function NodeList({ ids }) {
  const [shown, setShown] = useState(null);
  const load = async () => {
    const nodes = await attempt(() => Promise.all(ids.slice(0, 50).map((id) => get(`/nodes/${id}`))));
    if (nodes) setShown(nodes);
  };
  if (!ids.length) return null;
  return html`<div class="block-nodes">
    <h4>${t("context_nodes")} (${ids.length})</h4>
    ${shown
      ? html`<ol class="node-list" data-testid="block-nodes">${shown.map(
          (n) => html`<li key=${n.id}><span class="badge">${t(`context_kind_${n.kind}`)} · ${n.turn}</span> <span class="clip3 prewrap">${n.text}</span></li>`,
        )}</ol>`
      : html`<button data-testid="block-nodes-load" onClick=${load}>${t("context_show_nodes")}</button>`}
    ${!shown ? html`<span class="muted mono"> ${ids.slice(0, 6).map(short).join(" ")}${ids.length > 6 ? " …" : ""}</span>` : null}
  </div>`;
}

const loreName = (l) => `${l.title}${l.sticky ? ` (${t("context_lore_sticky")})` : l.key ? ` (${l.key})` : ""}`;

function Block({ context, block, index, open, onToggle }) {
  const kind = layer(block.what);
  return html`<li class=${`block layer-${kind}`} data-testid="context-block" data-what=${block.what}>
    <button class="block-head" aria-expanded=${open} onClick=${() => onToggle(index)}>
      <span class=${`swatch layer-${kind}`}></span>
      <strong>${t(`layer_${kind}`)}</strong>${kind !== block.what ? html` <span class="mono muted">${block.what}</span>` : null}
      <span class="muted grow">${block.why}</span>
      <span class="mono">${block.tokens}</span>
    </button>
    ${open
      ? html`<div class="block-body">
          ${block.covers ? html`<p class="muted">${t("context_covers", { a: block.covers[0], b: block.covers[1] })}</p>` : null}
          ${block.scores && block.scores.length
            ? html`<p data-testid="recall-scores"><span class="muted">${t("context_scores")}:</span> ${block.scores.map((s) => s.toFixed(3)).join(", ")}</p>`
            : null}
          ${block.lore && block.lore.some((l) => !l.left_out)
            ? html`<p><span class="muted">${t("context_lore")}:</span> ${block.lore.filter((l) => !l.left_out).map(loreName).join(" · ")}</p>`
            : null}
          ${block.lore && block.lore.some((l) => l.left_out)
            ? html`<p data-testid="lore-left-out"><span class="muted">${t("context_lore_left_out")}:</span> ${block.lore.filter((l) => l.left_out).map((l) => `${l.title} (${l.detail || l.left_out})`).join(" · ")}</p>`
            : null}
          ${block.memory && block.memory.length
            ? html`<p><span class="muted">${t("context_memory")}:</span> ${block.memory.map((m) => m.key).join(" · ")}</p>`
            : null}
          <pre data-testid="block-text">${blockText(context, block)}</pre>
          <${NodeList} ids=${block.node_ids} />
        </div>`
      : null}
  </li>`;
}

export function BudgetBar({ context }) {
  const used = Math.min(1, context.tokens / Math.max(1, context.budget));
  return html`<div class="budget" data-testid="budget-bar" role="img"
      aria-label=${t("context_tokens", { tokens: context.tokens, budget: context.budget })}>
    ${context.explain.map((block, i) => {
      const width = (100 * block.tokens) / Math.max(1, context.budget);
      return width > 0
        ? html`<span key=${i} class=${`seg layer-${layer(block.what)}`} style=${{ width: `${width}%` }}
            title=${`${block.what}: ${block.tokens}`}></span>`
        : null;
    })}
    <span class="seg free" style=${{ width: `${100 * (1 - used)}%` }} title=${t("context_free")}></span>
  </div>`;
}

export function Context({ story }) {
  const [context, error, reload] = useLoad(() => get(`/stories/${story.id}/context`), [story.id, story.version, story.leaf_id]);
  const [open, setOpen] = useState(() => new Set());
  const [messages, setMessages] = useState(false);
  if (error) return html`<${Problem} error=${error} onRetry=${reload} />`;
  if (!context) return html`<${Loading} />`;
  const toggle = (i) => {
    const next = new Set(open);
    if (next.has(i)) next.delete(i);
    else next.add(i);
    setOpen(next);
  };
  const layers = [...new Set(context.explain.map((b) => layer(b.what)))];
  return html`<div class="context" data-testid="context">
    <div class="row">
      <strong data-testid="context-tokens">${t("context_tokens", { tokens: context.tokens, budget: context.budget })}</strong>
      <span class="muted">${t("context_counter", { name: context.token_counter })}</span>
      <span class="grow"></span>
      <button onClick=${reload}>${t("context_refresh")}</button>
    </div>
    <${BudgetBar} context=${context} />
    <ul class="legend">${layers.map((l) => html`<li key=${l}><span class=${`swatch layer-${l}`}></span>${t(`layer_${l}`)}</li>`)}</ul>
    ${context.cut_turns || context.cut_nodes
      ? html`<p class="muted">${t("context_cut", { turns: context.cut_turns, nodes: context.cut_nodes })}</p>`
      : null}
    <h2>${t("context_blocks")}</h2>
    <ol class="blocks">
      ${context.explain.map((block, i) => html`<${Block} key=${i} index=${i} context=${context} block=${block} open=${open.has(i)} onToggle=${toggle} />`)}
    </ol>
    <h2>${t("context_messages")}</h2>
    <label class="inline"><input type="checkbox" checked=${messages} onChange=${(e) => setMessages(e.target.checked)} /> ${t("context_show_messages")}</label>
    ${messages
      ? html`<ol class="messages-sent">${context.messages.map(
          (m, i) => html`<li key=${i}><span class="badge">${m.role}</span><pre>${m.content}</pre></li>`,
        )}</ol>`
      : null}
  </div>`;
}
