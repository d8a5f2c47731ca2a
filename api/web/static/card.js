// A card's page: who it is, its greetings (a story starts from any of them), its stories, the keeping of
// the character (`anchor.js`), and its memory across them.
import { html } from "./html.js";
import { register, t } from "./i18n.js";
import { get } from "./api.js";
import { Loading, Problem, useLoad } from "./ui.js";
import { startStory } from "./home.js";
import { CardMemory } from "./memory.js";
import { AnchorEditor } from "./anchor.js";

register({
  en: { card_greetings: "Greetings", card_stories: "Its stories", card_start_with: "Start with this greeting", card_memory: "Memory across its stories" },
  zh: { card_greetings: "开场白", card_stories: "它的故事", card_start_with: "用这个开场白开始", card_memory: "跨故事的记忆" },
});

export function CardPage({ id }) {
  const [card, error, reload] = useLoad(() => get(`/cards/${id}`), [id]);
  const [stories] = useLoad(() => get("/stories", { card_id: id, limit: 200 }), [id]);
  if (error) return html`<${Problem} error=${error} onRetry=${reload} />`;
  if (!card) return html`<${Loading} />`;
  const greetings = [card.card.first_mes, ...card.card.alternate_greetings];
  return html`<section class="card-page">
    <h1>${card.name}</h1>
    <p class="prewrap">${card.card.description.slice(0, 1200)}</p>
    <h2>${t("card_greetings")}</h2>
    <ol class="greetings">
      ${greetings.map(
        (text, index) => html`<li key=${index}>
          <div class="prewrap clip3">${text}</div>
          <button data-testid="start-with" onClick=${() => startStory(id, index)}>${t("card_start_with")}</button>
        </li>`,
      )}
    </ol>
    <h2>${t("card_stories")}</h2>
    <ul class="list">
      ${(stories ? stories.items : []).map(
        (s) => html`<li key=${s.id}><a href=${`#/stories/${s.id}/play`}>${s.title}</a>
          <span class="muted"> · ${s.nodes} · ${s.last_words.slice(0, 80)}</span></li>`,
      )}
    </ul>
    <${AnchorEditor} key=${card.version} card=${card} onSaved=${reload} />
    <h2>${t("card_memory")}</h2>
    <${CardMemory} cardId=${id} />
  </section>`;
}
