// A story's page: its title and its views in tabs (play, tree, context, scene, memory, jobs).
// Each view gets the story (as GET /v1/stories/{id} answers), its card (once loaded) and `reload`, to call when it moved the
// leaf or changed what the others show.
import { html } from "./html.js";
import { register, t } from "./i18n.js";
import { get } from "./api.js";
import { Loading, Problem, useLoad } from "./ui.js";
import { Play } from "./play.js";
import { Tree } from "./tree.js";
import { Context } from "./context.js";
import { Scene } from "./scene.js";
import { StoryMemory } from "./memory.js";
import { Jobs } from "./jobs.js";

register({
  en: { tab_play: "Play", tab_tree: "Tree", tab_context: "Context", tab_scene: "Scene", tab_memory: "Memory", tab_jobs: "Jobs", card: "Card" },
  zh: { tab_play: "对话", tab_tree: "树", tab_context: "上下文", tab_scene: "场景", tab_memory: "记忆", tab_jobs: "后台", card: "角色卡" },
});

const TABS = { play: Play, tree: Tree, context: Context, scene: Scene, memory: StoryMemory, jobs: Jobs };

export function StoryPage({ id, tab }) {
  const [story, error, reload] = useLoad(() => get(`/stories/${id}`), [id]);
  const [card] = useLoad(() => (story ? get(`/cards/${story.card_id}`) : Promise.resolve(null)), [story && story.card_id]);
  if (error) return html`<${Problem} error=${error} onRetry=${reload} />`;
  if (!story) return html`<${Loading} />`;
  const View = TABS[tab] || Play;
  return html`<section class="story">
    <header class="story-head">
      <h1>${story.title}</h1>
      <a href=${`#/cards/${story.card_id}`}>${card ? card.name : t("card")}</a>
    </header>
    <nav class="tabs" role="tablist">
      ${Object.keys(TABS).map(
        (name) => html`<a role="tab" aria-selected=${name === tab} class=${name === tab ? "active" : ""}
          href=${`#/stories/${id}/${name}`}>${t(`tab_${name}`)}</a>`,
      )}
    </nav>
    <div class="view" role="tabpanel"><${View} story=${story} card=${card} reload=${reload} /></div>
  </section>`;
}
