// Play: the path to the leaf as a chat. Engine mode streams the model's reply as it is written;
// bring-your-own mode lets the user type both sides. Every message has its swipes (siblings), edit
// (a new sibling), branch (checkout), hide and star; the last reply can be regenerated or stopped, a
// decision card answered, and the leaf saved.
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { register, t } from "./i18n.js";
import { get, post, request, stream } from "./api.js";
import { attempt, Loading, notify, Problem, useLoad } from "./ui.js";
import { Saves } from "./saves.js";

register({
  en: {
    play_earlier: "Show earlier messages",
    play_you: "You",
    play_send: "Send",
    play_placeholder: "Your words… (Ctrl+Enter sends)",
    play_mode: "Mode",
    play_engine: "Engine (the model replies)",
    play_byo: "Type both sides",
    play_as_user: "as the user",
    play_as_reply: "as the character",
    play_regenerate: "Regenerate",
    play_stop: "Stop",
    play_edit: "Edit",
    play_save_edit: "Save as a new version",
    play_cancel: "Cancel",
    play_branch: "Branch here",
    play_hide: "Hide",
    play_unhide: "Unhide",
    play_star: "Star",
    play_unstar: "Unstar",
    play_prev: "Previous version",
    play_next: "Next version",
    play_swipe: "{i}/{n}",
    play_hidden: "hidden",
    play_writing: "writing…",
    play_stopped: "stopped",
    play_answer: "Answer",
    play_own_answer: "Or in your own words",
    play_kind_greeting: "greeting",
    play_reply: "Reply",
    play_role: "Who writes it",
    play_yours_last: "The last message is yours: let the character reply (Reply), or edit it.",
    play_being_written: "being written",
    play_relayed: "This chat belongs to a front end: it came through the chat-completions proxy, and the front end keeps it. Here it is read-only; what you see in the other tabs (the context, the scene, the memory) is what changji gives its model.",
  },
  zh: {
    play_earlier: "显示更早的消息",
    play_you: "你",
    play_send: "发送",
    play_placeholder: "你的话……（Ctrl+Enter 发送）",
    play_mode: "模式",
    play_engine: "引擎（由模型回复）",
    play_byo: "两边都由我来写",
    play_as_user: "以用户身份",
    play_as_reply: "以角色身份",
    play_regenerate: "重新生成",
    play_stop: "停止",
    play_edit: "编辑",
    play_save_edit: "存为新版本",
    play_cancel: "取消",
    play_branch: "从这里分支",
    play_hide: "隐藏",
    play_unhide: "取消隐藏",
    play_star: "加星",
    play_unstar: "取消加星",
    play_prev: "上一个版本",
    play_next: "下一个版本",
    play_swipe: "{i}/{n}",
    play_hidden: "已隐藏",
    play_writing: "正在写……",
    play_stopped: "已停止",
    play_answer: "回答",
    play_own_answer: "或用你自己的话",
    play_kind_greeting: "开场白",
    play_reply: "回复",
    play_role: "由谁来写",
    play_yours_last: "最后一条是你的话：先让角色回复（回复），或者编辑它。",
    play_being_written: "正在写",
    play_relayed: "这段对话属于一个前端：它经由 chat-completions 代理而来，由前端保管。这里只读；其他标签页（上下文、场景、记忆）显示的是场记交给模型的内容。",
  },
});

const MODE = "changji.mode";
const TIP_STEPS = 50; // how far a swipe follows a version's own line down (then it stops there)

// The newest leaf below a node, following each node's newest child.
async function newestTip(nodeId) {
  let at = nodeId;
  for (let step = 0; step < TIP_STEPS; step++) {
    const children = (await get(`/nodes/${at}/children`)).nodes.filter((n) => n.phase !== "withdrawn");
    if (!children.length) break;
    at = children.reduce((a, b) => (a.created_at >= b.created_at ? a : b)).id;
  }
  return at;
}

function Swipes({ node, siblings, onMove, busy }) {
  const list = siblings || [];
  if (list.length < 2) return null;
  const index = list.findIndex((s) => s.id === node.id);
  const go = (step) => onMove(list[(index + step + list.length) % list.length]);
  return html`<span class="swipes" data-testid="swipes">
    <button class="link" aria-label=${t("play_prev")} disabled=${busy} onClick=${() => go(-1)}>‹</button>
    <span data-testid="swipe-position">${t("play_swipe", { i: index + 1, n: list.length })}</span>
    <button class="link" aria-label=${t("play_next")} disabled=${busy} onClick=${() => go(1)}>›</button>
  </span>`;
}

function Message({ node, story, char, siblings, last, busy, actions, readOnly }) {
  const [editing, setEditing] = useState(null);
  const who = node.kind === "user" ? story.settings.user_name || t("play_you") : char;
  const save = async () => {
    if (await actions.edit(node, editing)) setEditing(null); // (a refused edit keeps its words)
  };
  return html`<article class=${`msg ${node.kind}${node.hidden ? " hidden" : ""}`} data-testid="message"
      data-kind=${node.kind} data-node=${node.id}>
    <header class="msg-head">
      <strong>${who}</strong>
      ${node.kind === "greeting" ? html`<span class="badge">${t("play_kind_greeting")}</span>` : null}
      ${node.starred ? html`<span class="badge star" title=${t("play_star")}>★</span>` : null}
      ${node.hidden ? html`<span class="badge">${t("play_hidden")}</span>` : null}
      ${node.phase === "stopped" ? html`<span class="badge">${t("play_stopped")}</span>` : null}
      ${node.phase === "writing" ? html`<span class="badge">${t("play_being_written")}</span>` : null}
      ${last && node.phase === "writing" && !readOnly
        ? html`<button class="danger" data-testid="stop-leaf" onClick=${() => actions.stop(node)}>${t("play_stop")}</button>`
        : null}
      <span class="grow"></span>
      ${node.kind !== "greeting" && !readOnly ? html`<${Swipes} node=${node} siblings=${siblings} onMove=${actions.swipe} busy=${busy} />` : null}
    </header>
    ${editing === null
      ? html`<div class="msg-text prewrap" data-testid="message-text">${node.text}</div>`
      : html`<div>
          <textarea aria-label=${t("play_edit")} data-testid="edit-text" value=${editing}
            onInput=${(e) => setEditing(e.target.value)}></textarea>
          <div class="row"><button class="primary" data-testid="edit-save" onClick=${save} disabled=${busy || !editing.trim()}>
            ${t("play_save_edit")}</button><button onClick=${() => setEditing(null)}>${t("play_cancel")}</button></div>
        </div>`}
    ${readOnly ? null : html`<footer class="msg-tools row">
      ${node.kind !== "greeting"
        ? html`<button class="link" data-testid="edit" disabled=${busy} onClick=${() => setEditing(node.text)}>${t("play_edit")}</button>`
        : null}
      ${!last ? html`<button class="link" data-testid="branch" disabled=${busy} onClick=${() => actions.branch(node)}>${t("play_branch")}</button>` : null}
      <button class="link" disabled=${busy} onClick=${() => actions.flag(node, node.hidden ? "unhide" : "hide")}>
        ${node.hidden ? t("play_unhide") : t("play_hide")}</button>
      <button class="link" disabled=${busy} onClick=${() => actions.flag(node, node.starred ? "unstar" : "star")}>
        ${node.starred ? t("play_unstar") : t("play_star")}</button>
      ${last && node.kind === "reply"
        ? html`<button class="link" data-testid="regenerate" disabled=${busy} onClick=${() => actions.regenerate(node.parent_id)}>${t("play_regenerate")}</button>`
        : null}
      ${last && node.kind === "user"
        ? html`<button class="link" data-testid="reply" disabled=${busy} onClick=${() => actions.regenerate(node.id)}>${t("play_reply")}</button>`
        : null}
    </footer>`}
  </article>`;
}

function Ask({ ask, onAnswer, busy }) {
  const [own, setOwn] = useState("");
  return html`<div class="ask card-box" data-testid="ask">
    <p><strong>${ask.question}</strong></p>
    <div class="row">
      ${ask.options.map((option) => html`<button disabled=${busy} onClick=${() => onAnswer(option)}>${option}</button>`)}
    </div>
    <label for="own-answer">${t("play_own_answer")}</label>
    <div class="row">
      <input id="own-answer" class="grow" value=${own} onInput=${(e) => setOwn(e.target.value)} />
      <button class="primary" disabled=${busy || !own.trim()} onClick=${() => onAnswer(own)}>${t("play_answer")}</button>
    </div>
  </div>`;
}

export function Play({ story, card, reload }) {
  const char = card ? card.name : "…";
  const [limit, setLimit] = useState(40);
  const loads = useRef(0); // paths asked for so far: a finished turn is let go once a later one is read
  const [path, error, reloadPath] = useLoad(() => {
    const gen = ++loads.current;
    return get(`/stories/${story.id}/path`, { limit }).then((read) => ({ ...read, gen }));
  }, [story.id, story.leaf_id, story.version, limit]);
  const [siblings, setSiblings] = useState({});
  const [mode, setMode] = useState(localStorage.getItem(MODE) || "engine");
  const [role, setRole] = useState("user");
  const [text, setText] = useState("");
  const [live, setLive] = useState(null); // {user, userId, text, id, done, after}: the turn being written here
  const [ask, setAsk] = useState(null);
  const stopRef = useRef(null);
  const end = useRef(null);
  const leafNode = path ? path.nodes[path.nodes.length - 1] : null;
  const writing = Boolean(leafNode && leafNode.kind === "reply" && leafNode.phase === "writing");
  const [moving, setMoving] = useState(false); // a swipe finding where its version's line went
  const busy = live !== null || writing || moving;

  useEffect(() => {
    if (!path) return;
    let alive = true;
    const shown = path.nodes.filter((n) => n.kind !== "greeting");
    Promise.all(shown.map((n) => get(`/nodes/${n.id}/siblings`).then((s) => [n.id, s.nodes], () => [n.id, []]))).then(
      (pairs) => alive && setSiblings(Object.fromEntries(pairs)),
    );
    const leaf = path.nodes[path.nodes.length - 1];
    setLive((l) => (l && l.done && path.gen > l.after ? null : l)); // (the path read after the turn ended)
    setRole(leaf && leaf.kind === "user" ? "reply" : "user");
    if (leaf && leaf.kind === "reply" && leaf.phase === "waiting") {
      get(`/nodes/${leaf.id}/draft`).then((d) => {
        const open = d.asks.filter((a) => !a.answer);
        if (alive && open.length) setAsk({ ...open[open.length - 1], reply_id: leaf.id });
      }, notify);
    } else setAsk(null);
    return () => {
      alive = false;
    };
  }, [path]);

  useEffect(() => {
    if (!writing || live) return undefined; // (a turn started elsewhere, or before this view opened)
    const timer = setInterval(async () => {
      const now = await get(`/nodes/${leafNode.id}`).catch(() => null); // (one node, not the whole path)
      if (now && now.phase !== "writing") reloadPath();
    }, 1500);
    return () => clearInterval(timer);
  }, [writing, live, leafNode && leafNode.id]);

  useEffect(() => {
    if (live && end.current) end.current.scrollIntoView({ block: "nearest" });
  }, [live && live.text.length > 0]);

  const chooseMode = (value) => {
    setMode(value);
    localStorage.setItem(MODE, value);
  };

  // Plays a streamed engine call (a turn, a regenerate, an answer): its reply grows on the page, and stays
  // until the path is read again after it ended (no jump). True when the turn was opened (its words kept,
  // whatever became of the reply); false when it was refused before (the words are still the user's).
  const play = async (path_, body, userText) => {
    setLive({ user: userText, userId: null, text: "", id: null, done: false, after: 0 });
    stopRef.current = { id: null };
    let shown = "";
    let opened = false;
    try {
      await stream(path_, body, (name, data) => {
        if (name === "turn") {
          opened = true;
          stopRef.current.id = data.reply_id;
          setAsk(null);
          setLive((l) => ({ ...l, id: data.reply_id, userId: data.user_id }));
        } else if (name === "delta") {
          shown = data.first && (data.tool === "draft_write" || data.tool === "draft") ? data.text : shown + data.text;
          setLive((l) => ({ ...l, text: shown }));
        } else if (name === "sealed") {
          setLive((l) => ({ ...l, text: data.text }));
        } else if (name === "ask") {
          setAsk(data);
        } else if (name === "error") {
          notify({ title: data.outcome, detail: data.detail });
        }
      });
    } catch (failure) {
      notify(failure);
    } finally {
      stopRef.current = null;
      setLive((l) => (l && opened ? { ...l, done: true, after: loads.current } : null));
      reload(); // (the story, when the turn moved its leaf)
      reloadPath(); // (an answered card's reply moves nothing of the story's own)
    }
    return opened;
  };

  const stop = async () => {
    const running = stopRef.current;
    if (running && running.id) await attempt(() => post(`/nodes/${running.id}/stop`));
  };

  const send = async () => {
    const words = text.trim();
    if (!words || busy || (mode === "engine" && leafNode && leafNode.kind === "user")) return;
    if (mode === "engine") {
      setText("");
      if (!(await play(`/stories/${story.id}/turns`, { text: words }, words))) setText((now) => now || words);
      return;
    }
    const made = await attempt(() => request("POST", `/stories/${story.id}/nodes`, { body: { kind: role, text: words } }));
    if (made) {
      setText("");
      setRole(role === "user" ? "reply" : "user");
      reload();
    }
  };

  const actions = {
    swipe: async (node) => {
      setMoving(true);
      const tip = await attempt(() => newestTip(node.id)); // (where that version's own line went)
      if (tip && (await attempt(() => post(`/stories/${story.id}/checkout`, { node_id: tip })))) reload();
      setMoving(false);
    },
    branch: async (node) => {
      // from a reply: the next words go under it; from the user's words: other words in their place
      const at = node.kind === "user" ? node.parent_id : node.id;
      if (await attempt(() => post(`/stories/${story.id}/checkout`, { node_id: at }))) reload();
    },
    stop: async (node) => {
      await attempt(() => post(`/nodes/${node.id}/stop`));
      reloadPath();
    },
    flag: async (node, what) => {
      if (await attempt(() => post(`/nodes/${node.id}/${what}`))) reloadPath();
    },
    regenerate: async (userId) => {
      if (mode === "engine") await play(`/stories/${story.id}/regenerate`, { user_id: userId }, null);
      else notify({ title: t("play_regenerate"), detail: t("play_engine") });
    },
    edit: async (node, words) => {
      if (node.kind === "user" && mode === "engine") {
        return play(`/stories/${story.id}/turns`, { text: words, parent_id: node.parent_id }, words);
      }
      const body = { kind: node.kind, text: words, parent_id: node.parent_id };
      const made = await attempt(() => request("POST", `/stories/${story.id}/nodes`, { body }));
      if (made) reload();
      return Boolean(made);
    },
  };

  if (error) return html`<${Problem} error=${error} onRetry=${reloadPath} />`;
  if (!path) return html`<${Loading} />`;
  const nodes = path.nodes;
  const leaf = nodes[nodes.length - 1];
  const yoursLast = mode === "engine" && leaf.kind === "user"; // (new words would go under the user's own)
  // the turn being written is shown live (its nodes left out of the path shown, if a read caught them)
  const shownLive = live && !(live.done && live.id && nodes.some((n) => n.id === live.id));
  const shownInLive = (n) => n.id === live.id || (live.user !== null && n.id === live.userId);
  const listed = live && shownLive ? nodes.filter((n) => !shownInLive(n)) : nodes;
  return html`<div class="play">
    ${story.relayed ? null : html`<${Saves} story=${story} reload=${reload} />`}
    ${path.truncated ? html`<button class="link" onClick=${() => setLimit(limit + 100)}>${t("play_earlier")}</button>` : null}
    <div class="messages" data-testid="messages">
      ${listed.map(
        (node) => html`<${Message} key=${node.id} node=${node} story=${story} char=${char} siblings=${siblings[node.id]}
          last=${node.id === leaf.id && !live} busy=${busy} actions=${actions} readOnly=${story.relayed} />`,
      )}
      ${shownLive && live.user
        ? html`<article class="msg user pending"><div class="msg-text prewrap">${live.user}</div></article>`
        : null}
      ${shownLive
        ? html`<article class="msg reply live" data-testid="live-reply" aria-busy="true">
            <header class="msg-head"><strong>${char}</strong><span class="badge">${t("play_writing")}</span>
              <span class="grow"></span><button class="danger" data-testid="stop" disabled=${!live.id} onClick=${stop}>${t("play_stop")}</button></header>
            <div class="msg-text prewrap" data-testid="live-text">${live.text}</div>
          </article>`
        : null}
      ${ask ? html`<${Ask} ask=${ask} busy=${busy}
          onAnswer=${(answer) => play(`/nodes/${ask.reply_id}/answer`, { answer }, null)} />` : null}
      <div ref=${end}></div>
    </div>
    ${story.relayed ? html`<p class="card-box muted" data-testid="relayed">${t("play_relayed")}</p>` : html`<div class="composer card-box">
      <div class="row">
        <label for="mode" class="inline">${t("play_mode")}</label>
        <select id="mode" data-testid="mode" value=${mode} onChange=${(e) => chooseMode(e.target.value)}>
          <option value="engine">${t("play_engine")}</option>
          <option value="byo">${t("play_byo")}</option>
        </select>
        ${mode === "byo"
          ? html`<select aria-label=${t("play_role")} data-testid="role" value=${role} onChange=${(e) => setRole(e.target.value)}>
              <option value="user">${t("play_as_user")}</option><option value="reply">${t("play_as_reply")}</option>
            </select>`
          : null}
      </div>
      <textarea data-testid="composer-text" aria-label=${t("play_placeholder")} placeholder=${t("play_placeholder")}
        value=${text} onInput=${(e) => setText(e.target.value)}
        onKeyDown=${(e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); send(); } }}></textarea>
      <div class="row"><span class="grow"></span>
        ${yoursLast ? html`<span class="muted" data-testid="yours-last">${t("play_yours_last")}</span>` : null}
        <button class="primary" data-testid="composer-send" disabled=${busy || yoursLast || !text.trim()} onClick=${send}>${t("play_send")}</button>
      </div>
    </div>`}
  </div>`;
}
