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
  },
});

const MODE = "changji.mode";

function Swipes({ node, siblings, onMove }) {
  const list = siblings || [];
  if (list.length < 2) return null;
  const index = list.findIndex((s) => s.id === node.id);
  const go = (step) => onMove(list[(index + step + list.length) % list.length]);
  return html`<span class="swipes" data-testid="swipes">
    <button class="link" aria-label=${t("play_prev")} onClick=${() => go(-1)}>‹</button>
    <span data-testid="swipe-position">${t("play_swipe", { i: index + 1, n: list.length })}</span>
    <button class="link" aria-label=${t("play_next")} onClick=${() => go(1)}>›</button>
  </span>`;
}

function Message({ node, story, char, siblings, last, busy, actions }) {
  const [editing, setEditing] = useState(null);
  const who = node.kind === "user" ? story.settings.user_name || t("play_you") : char;
  const save = async () => {
    await actions.edit(node, editing);
    setEditing(null);
  };
  return html`<article class=${`msg ${node.kind}${node.hidden ? " hidden" : ""}`} data-testid="message"
      data-kind=${node.kind} data-node=${node.id}>
    <header class="msg-head">
      <strong>${who}</strong>
      ${node.kind === "greeting" ? html`<span class="badge">${t("play_kind_greeting")}</span>` : null}
      ${node.starred ? html`<span class="badge star" title=${t("play_star")}>★</span>` : null}
      ${node.hidden ? html`<span class="badge">${t("play_hidden")}</span>` : null}
      ${node.phase === "stopped" ? html`<span class="badge">${t("play_stopped")}</span>` : null}
      <span class="grow"></span>
      ${node.kind !== "greeting" ? html`<${Swipes} node=${node} siblings=${siblings} onMove=${actions.swipe} />` : null}
    </header>
    ${editing === null
      ? html`<div class="msg-text prewrap" data-testid="message-text">${node.text}</div>`
      : html`<div>
          <textarea aria-label=${t("play_edit")} data-testid="edit-text" value=${editing}
            onInput=${(e) => setEditing(e.target.value)}></textarea>
          <div class="row"><button class="primary" data-testid="edit-save" onClick=${save} disabled=${busy || !editing.trim()}>
            ${t("play_save_edit")}</button><button onClick=${() => setEditing(null)}>${t("play_cancel")}</button></div>
        </div>`}
    <footer class="msg-tools row">
      ${node.kind !== "greeting"
        ? html`<button class="link" data-testid="edit" disabled=${busy} onClick=${() => setEditing(node.text)}>${t("play_edit")}</button>`
        : null}
      ${!last ? html`<button class="link" data-testid="branch" disabled=${busy} onClick=${() => actions.branch(node)}>${t("play_branch")}</button>` : null}
      <button class="link" disabled=${busy} onClick=${() => actions.flag(node, node.hidden ? "unhide" : "hide")}>
        ${node.hidden ? t("play_unhide") : t("play_hide")}</button>
      <button class="link" disabled=${busy} onClick=${() => actions.flag(node, node.starred ? "unstar" : "star")}>
        ${node.starred ? t("play_unstar") : t("play_star")}</button>
      ${last && node.kind === "reply"
        ? html`<button class="link" data-testid="regenerate" disabled=${busy} onClick=${() => actions.regenerate(node)}>${t("play_regenerate")}</button>`
        : null}
    </footer>
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
  const [path, error, reloadPath] = useLoad(
    () => get(`/stories/${story.id}/path`, { limit }),
    [story.id, story.leaf_id, story.version, limit],
  );
  const [siblings, setSiblings] = useState({});
  const [mode, setMode] = useState(localStorage.getItem(MODE) || "engine");
  const [role, setRole] = useState("user");
  const [text, setText] = useState("");
  const [live, setLive] = useState(null); // {user, reply, text, id}: the turn being written
  const [ask, setAsk] = useState(null);
  const stopRef = useRef(null);
  const end = useRef(null);
  const busy = live !== null;

  useEffect(() => {
    if (!path) return;
    let alive = true;
    const shown = path.nodes.filter((n) => n.kind !== "greeting");
    Promise.all(shown.map((n) => get(`/nodes/${n.id}/siblings`).then((s) => [n.id, s.nodes], () => [n.id, []]))).then(
      (pairs) => alive && setSiblings(Object.fromEntries(pairs)),
    );
    const leaf = path.nodes[path.nodes.length - 1];
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
    if (live && end.current) end.current.scrollIntoView({ block: "nearest" });
  }, [live && live.text.length > 0]);

  const chooseMode = (value) => {
    setMode(value);
    localStorage.setItem(MODE, value);
  };

  // Plays a streamed engine call (a turn, a regenerate, an answer): its reply grows on the page.
  const play = async (path_, body, userText) => {
    setLive({ user: userText, text: "", id: null });
    setAsk(null);
    const controller = new AbortController();
    stopRef.current = { controller, id: null };
    let shown = "";
    try {
      await stream(path_, body, (name, data) => {
        if (name === "turn") {
          stopRef.current.id = data.reply_id;
          setLive((l) => ({ ...l, id: data.reply_id }));
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
      }, { signal: controller.signal });
    } catch (failure) {
      if (failure.name !== "AbortError") notify(failure);
    } finally {
      stopRef.current = null;
      setLive(null);
      reload();
    }
  };

  const stop = async () => {
    const running = stopRef.current;
    if (running && running.id) await attempt(() => post(`/nodes/${running.id}/stop`));
  };

  const send = async () => {
    const words = text.trim();
    if (!words || busy) return;
    if (mode === "engine") {
      setText("");
      await play(`/stories/${story.id}/turns`, { text: words }, words);
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
      if (await attempt(() => post(`/stories/${story.id}/checkout`, { node_id: node.id }))) reload();
    },
    branch: async (node) => {
      if (await attempt(() => post(`/stories/${story.id}/checkout`, { node_id: node.id }))) reload();
    },
    flag: async (node, what) => {
      if (await attempt(() => post(`/nodes/${node.id}/${what}`))) reloadPath();
    },
    regenerate: async (node) => {
      if (mode === "engine") await play(`/stories/${story.id}/regenerate`, { user_id: node.parent_id }, null);
      else notify({ title: t("play_regenerate"), detail: t("play_engine") });
    },
    edit: async (node, words) => {
      if (node.kind === "user" && mode === "engine") {
        await play(`/stories/${story.id}/turns`, { text: words, parent_id: node.parent_id }, words);
        return;
      }
      const body = { kind: node.kind, text: words, parent_id: node.parent_id };
      if (await attempt(() => request("POST", `/stories/${story.id}/nodes`, { body }))) reload();
    },
  };

  if (error) return html`<${Problem} error=${error} onRetry=${reloadPath} />`;
  if (!path) return html`<${Loading} />`;
  const nodes = path.nodes;
  const leaf = nodes[nodes.length - 1];
  return html`<div class="play">
    <${Saves} story=${story} reload=${reload} />
    ${path.truncated ? html`<button class="link" onClick=${() => setLimit(limit + 100)}>${t("play_earlier")}</button>` : null}
    <div class="messages" data-testid="messages">
      ${nodes.map(
        (node) => html`<${Message} key=${node.id} node=${node} story=${story} char=${char} siblings=${siblings[node.id]}
          last=${node.id === leaf.id && !live} busy=${busy} actions=${actions} />`,
      )}
      ${live && live.user
        ? html`<article class="msg user pending"><div class="msg-text prewrap">${live.user}</div></article>`
        : null}
      ${live
        ? html`<article class="msg reply live" data-testid="live-reply" aria-busy="true">
            <header class="msg-head"><strong>${char}</strong><span class="badge">${t("play_writing")}</span>
              <span class="grow"></span><button class="danger" data-testid="stop" onClick=${stop}>${t("play_stop")}</button></header>
            <div class="msg-text prewrap" data-testid="live-text">${live.text}</div>
          </article>`
        : null}
      ${ask ? html`<${Ask} ask=${ask} busy=${busy}
          onAnswer=${(answer) => play(`/nodes/${ask.reply_id}/answer`, { answer }, null)} />` : null}
      <div ref=${end}></div>
    </div>
    <div class="composer card-box">
      <div class="row">
        <label for="mode" class="inline">${t("play_mode")}</label>
        <select id="mode" data-testid="mode" value=${mode} onChange=${(e) => chooseMode(e.target.value)}>
          <option value="engine">${t("play_engine")}</option>
          <option value="byo">${t("play_byo")}</option>
        </select>
        ${mode === "byo"
          ? html`<select aria-label=${t("play_mode")} data-testid="role" value=${role} onChange=${(e) => setRole(e.target.value)}>
              <option value="user">${t("play_as_user")}</option><option value="reply">${t("play_as_reply")}</option>
            </select>`
          : null}
      </div>
      <textarea data-testid="composer-text" aria-label=${t("play_placeholder")} placeholder=${t("play_placeholder")}
        value=${text} onInput=${(e) => setText(e.target.value)}
        onKeyDown=${(e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); send(); } }}></textarea>
      <div class="row"><span class="grow"></span>
        <button class="primary" data-testid="composer-send" disabled=${busy || !text.trim()} onClick=${send}>${t("play_send")}</button>
      </div>
    </div>
  </div>`;
}
