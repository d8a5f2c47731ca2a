// Saves and world lines: save the leaf under a name, go back to any save, rename a world line.
import { useState } from "preact/hooks";
import { html } from "./html.js";
import { register, t } from "./i18n.js";
import { get, patch, post } from "./api.js";
import { attempt, useLoad } from "./ui.js";

register({
  en: {
    saves_title: "Saves ({n})",
    saves_name: "Save name",
    saves_save: "Save here",
    saves_restore: "Go back here",
    saves_current: "current",
    saves_rename: "Rename",
    saves_worldline: "World line name",
  },
  zh: {
    saves_title: "存档（{n}）",
    saves_name: "存档名",
    saves_save: "在这里存档",
    saves_restore: "回到这里",
    saves_current: "当前",
    saves_rename: "改名",
    saves_worldline: "世界线名称",
  },
});

export function Saves({ story, reload }) {
  const [saves, , reloadSaves] = useLoad(() => get(`/stories/${story.id}/saves`), [story.id, story.version]);
  const [name, setName] = useState("");
  const count = saves ? saves.worldlines.reduce((n, w) => n + w.saves.length, 0) : 0;
  const save = async () => {
    const body = name.trim() ? { name: name.trim() } : {};
    if (await attempt(() => post(`/stories/${story.id}/saves`, body))) {
      setName("");
      reloadSaves();
    }
  };
  const restore = async (save) => {
    if (await attempt(() => post(`/stories/${story.id}/saves/${save.id}/restore`))) reload();
  };
  const rename = async (line) => {
    const value = prompt(t("saves_worldline"), line.name);
    if (value && value.trim() && (await attempt(() => patch(`/stories/${story.id}/worldlines/${line.id}`, { name: value.trim() }))))
      reloadSaves();
  };
  return html`<details class="saves card-box" data-testid="saves">
    <summary>${t("saves_title", { n: count })}</summary>
    <div class="row">
      <input aria-label=${t("saves_name")} placeholder=${t("saves_name")} value=${name} onInput=${(e) => setName(e.target.value)} />
      <button data-testid="save-here" onClick=${save}>${t("saves_save")}</button>
    </div>
    ${(saves ? saves.worldlines : []).map(
      (line) => html`<div class="worldline" key=${line.id}>
        <h3 class="row">${line.name} <button class="link" onClick=${() => rename(line)}>${t("saves_rename")}</button></h3>
        <ul class="list">
          ${line.saves.map(
            (s) => html`<li key=${s.id} class="row">
              <span class="grow">${s.name}${s.id === saves.current_save_id ? html` <span class="badge">${t("saves_current")}</span>` : null}</span>
              <button onClick=${() => restore(s)}>${t("saves_restore")}</button>
            </li>`,
          )}
        </ul>
      </div>`,
    )}
  </details>`;
}
