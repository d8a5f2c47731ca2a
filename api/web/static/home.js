// The first page: the user's stories (their chats, the proxy's included) and cards; a card imported
// by dropping its file (PNG, JSON or CHARX); a story started from a card.
import { useState } from "preact/hooks";
import { html } from "./html.js";
import { register, t } from "./i18n.js";
import { get, post, request } from "./api.js";
import { attempt, Loading, Problem, useLoad } from "./ui.js";

register({
  en: {
    home_stories: "Stories",
    home_no_stories: "No story yet: start one from a card.",
    home_cards: "Cards",
    home_no_cards: "No card yet: import one.",
    home_nodes: "{n} nodes",
    home_start: "Start a story",
    home_import: "Import a card",
    home_drop: "Drop a card here (PNG, JSON or CHARX), or choose a file:",
    home_imported: "Imported {name}",
    home_relayed: "front end",
    home_relayed_hint: "A front end's chat, kept through the chat-completions proxy (read-only here)",
  },
  zh: {
    home_stories: "故事",
    home_no_stories: "还没有故事：从一张角色卡开始。",
    home_cards: "角色卡",
    home_no_cards: "还没有角色卡：导入一张。",
    home_nodes: "{n} 个节点",
    home_start: "开始新故事",
    home_import: "导入角色卡",
    home_drop: "把角色卡拖到这里（PNG、JSON 或 CHARX），或选择文件：",
    home_imported: "已导入 {name}",
    home_relayed: "前端",
    home_relayed_hint: "前端的对话，经由 chat-completions 代理保存（这里只读）",
  },
});

export async function startStory(cardId, greetingIndex = 0) {
  const story = await attempt(() => post("/stories", { card_id: cardId, greeting_index: greetingIndex }));
  if (story) location.hash = `#/stories/${story.id}/play`;
}

export function ImportCard({ onImported }) {
  const [over, setOver] = useState(false);
  const [busy, setBusy] = useState(false);
  const send = async (file) => {
    if (!file) return;
    setBusy(true);
    const answer = await attempt(() => request("POST", "/cards/import", { file }));
    setBusy(false);
    if (answer) onImported(answer.data);
  };
  return html`<div class=${"drop card-box" + (over ? " over" : "")} data-testid="card-drop"
      onDragOver=${(e) => { e.preventDefault(); setOver(true); }}
      onDragLeave=${() => setOver(false)}
      onDrop=${(e) => { e.preventDefault(); setOver(false); send(e.dataTransfer.files[0]); }}>
    <h2>${t("home_import")}</h2>
    <label for="card-file">${t("home_drop")}</label>
    <input id="card-file" type="file" accept=".png,.json,.charx,image/png,application/json,application/zip"
      data-testid="card-file" disabled=${busy} onChange=${(e) => send(e.target.files[0])} />
  </div>`;
}

export function Home() {
  const [stories, storiesError, reloadStories] = useLoad(() => get("/stories", { limit: 200 }), []);
  const [cards, cardsError, reloadCards] = useLoad(() => get("/cards", { limit: 200 }), []);
  const [imported, setImported] = useState(null);
  return html`<div class="home">
    <section>
      <h1>${t("home_stories")}</h1>
      <${Problem} error=${storiesError} onRetry=${reloadStories} />
      ${!stories && !storiesError ? html`<${Loading} />` : null}
      ${stories && !stories.items.length ? html`<p class="muted">${t("home_no_stories")}</p>` : null}
      <ul class="list" data-testid="stories">
        ${(stories ? stories.items : []).map(
          (s) => html`<li key=${s.id}>
            <a href=${`#/stories/${s.id}/play`}><strong>${s.title || s.card_name}</strong></a>
            <span class="muted"> · ${s.card_name} · ${t("home_nodes", { n: s.nodes })}</span>
            ${s.relayed ? html` <span class="badge" title=${t("home_relayed_hint")}>${t("home_relayed")}</span>` : null}
            <div class="muted clip">${s.last_words}</div>
          </li>`,
        )}
      </ul>
    </section>
    <section>
      <h1>${t("home_cards")}</h1>
      <${ImportCard} onImported=${(card) => { setImported(card.name); reloadCards(); }} />
      ${imported ? html`<p class="ok" role="status">${t("home_imported", { name: imported })}</p>` : null}
      <${Problem} error=${cardsError} onRetry=${reloadCards} />
      ${cards && !cards.items.length ? html`<p class="muted">${t("home_no_cards")}</p>` : null}
      <ul class="list" data-testid="cards">
        ${(cards ? cards.items : []).map(
          (c) => html`<li key=${c.id} class="row">
            <a class="grow" href=${`#/cards/${c.id}`}>${c.name}</a>
            <button data-testid="start-story" onClick=${() => startStory(c.id)}>${t("home_start")}</button>
          </li>`,
        )}
      </ul>
    </section>
  </div>`;
}
