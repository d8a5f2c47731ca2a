// The scene at the leaf: time, place, who is there and in what state, what is carried, the plot
// threads, the roster with first appearances, and the drift signals (`drift.js`). A user patch is merged by the scribe's rules; its
// applied parts and warnings are shown.
import { useState } from "preact/hooks";
import { html } from "./html.js";
import { register, t } from "./i18n.js";
import { get, patch } from "./api.js";
import { Loading, notify, Problem, useLoad } from "./ui.js";
import { Drift } from "./drift.js";

register({
  en: {
    scene_time: "Time", scene_location: "Location", scene_characters: "Characters", scene_inventory: "Inventory",
    scene_flags: "Flags", scene_threads: "Plot threads", scene_roster: "Roster (first appearances)",
    scene_present: "present", scene_absent: "elsewhere", scene_at: "at", scene_status: "status",
    scene_notes: "notes", scene_affinity: "affinity", scene_name: "name", scene_nothing: "nothing recorded yet",
    scene_edit: "Edit the scene", scene_apply: "Apply", scene_lines: "one per line",
    scene_character_edit: "A character (new or changed)", scene_raw: "Or a patch as JSON",
    scene_applied: "Applied", scene_warnings: "Warnings", scene_bad_json: "The patch is not valid JSON",
    scene_empty: "Nothing to apply", roster_characters: "people", roster_places: "places", roster_items: "items",
    roster_events: "threads and events",
  },
  zh: {
    scene_time: "时间", scene_location: "地点", scene_characters: "人物", scene_inventory: "物品",
    scene_flags: "标记", scene_threads: "剧情线", scene_roster: "登场名录（首次出现）",
    scene_present: "在场", scene_absent: "不在场", scene_at: "位置", scene_status: "状态",
    scene_notes: "备注", scene_affinity: "好感", scene_name: "名字", scene_nothing: "还没有记录",
    scene_edit: "编辑场景", scene_apply: "应用", scene_lines: "每行一项",
    scene_character_edit: "一个人物（新的或修改的）", scene_raw: "或用 JSON 写补丁",
    scene_applied: "已应用", scene_warnings: "警告", scene_bad_json: "补丁不是有效的 JSON",
    scene_empty: "没有要应用的内容", roster_characters: "人物", roster_places: "地点", roster_items: "物品",
    roster_events: "剧情与事件",
  },
});

const lines = (text) => text.split("\n").map((l) => l.trim()).filter(Boolean);

function Editor({ scene, onPatched, result, setResult }) {
  const s = scene.state;
  const [time, setTime] = useState(s.time || "");
  const [location, setLocation] = useState(s.location || "");
  const [inventory, setInventory] = useState((s.inventory || []).join("\n"));
  const [threads, setThreads] = useState((s.plot_threads || []).join("\n"));
  const [who, setWho] = useState({ name: "", at: "", status: "", notes: "" });
  const [raw, setRaw] = useState("");

  const send = async (body) => {
    try {
      const answer = await patch(`/stories/${scene.story_id}/scene`, { patch: body });
      setResult({ applied: answer.applied, warnings: answer.warnings });
      onPatched();
    } catch (failure) {
      setResult(null);
      notify(failure);
    }
  };
  const apply = () => {
    const body = {};
    if (time !== (s.time || "")) body.time = time;
    if (location !== (s.location || "")) body.location = location;
    if (inventory !== (s.inventory || []).join("\n")) body.inventory = lines(inventory);
    if (threads !== (s.plot_threads || []).join("\n")) body.plot_threads = lines(threads);
    if (who.name.trim()) {
      const fields = {};
      for (const key of ["at", "status", "notes"]) if (who[key].trim()) fields[key] = who[key].trim();
      body.characters = { [who.name.trim()]: fields };
    }
    if (raw.trim()) {
      try {
        Object.assign(body, JSON.parse(raw));
      } catch {
        notify({ title: t("scene_bad_json"), detail: raw.slice(0, 80) });
        return;
      }
    }
    if (!Object.keys(body).length) {
      notify({ title: t("scene_empty"), detail: "" });
      return;
    }
    send(body);
  };
  const field = (key) => (e) => setWho({ ...who, [key]: e.target.value });
  return html`<details class="card-box scene-edit" data-testid="scene-edit" open=${Boolean(result)}>
    <summary>${t("scene_edit")}</summary>
    <div class="grid2">
      <div><label for="scene-time">${t("scene_time")}</label><input id="scene-time" data-testid="scene-time" value=${time} onInput=${(e) => setTime(e.target.value)} /></div>
      <div><label for="scene-location">${t("scene_location")}</label><input id="scene-location" data-testid="scene-location" value=${location} onInput=${(e) => setLocation(e.target.value)} /></div>
      <div><label for="scene-inventory">${t("scene_inventory")} <span class="muted">(${t("scene_lines")})</span></label>
        <textarea id="scene-inventory" value=${inventory} onInput=${(e) => setInventory(e.target.value)}></textarea></div>
      <div><label for="scene-threads">${t("scene_threads")} <span class="muted">(${t("scene_lines")})</span></label>
        <textarea id="scene-threads" value=${threads} onInput=${(e) => setThreads(e.target.value)}></textarea></div>
    </div>
    <fieldset><legend>${t("scene_character_edit")}</legend>
      <div class="row">
        <input aria-label=${t("scene_name")} placeholder=${t("scene_name")} data-testid="scene-character-name" value=${who.name} onInput=${field("name")} />
        <input aria-label=${t("scene_at")} placeholder=${t("scene_at")} value=${who.at} onInput=${field("at")} />
        <input aria-label=${t("scene_status")} placeholder=${t("scene_status")} data-testid="scene-character-status" value=${who.status} onInput=${field("status")} />
        <input aria-label=${t("scene_notes")} placeholder=${t("scene_notes")} value=${who.notes} onInput=${field("notes")} />
      </div>
    </fieldset>
    <label for="scene-raw">${t("scene_raw")}</label>
    <textarea id="scene-raw" class="mono" data-testid="scene-raw" placeholder='{"flags": {"door_open": true}}' value=${raw} onInput=${(e) => setRaw(e.target.value)}></textarea>
    <button class="primary" data-testid="scene-apply" onClick=${apply}>${t("scene_apply")}</button>
    ${result
      ? html`<div class="scene-result" data-testid="scene-result">
          ${result.applied.length ? html`<p><strong>${t("scene_applied")}:</strong> ${result.applied.join(" · ")}</p>` : null}
          ${result.warnings.length
            ? html`<div class="problem" data-testid="scene-warnings"><strong>${t("scene_warnings")}:</strong><ul>${result.warnings.map((w) => html`<li>${w}</li>`)}</ul></div>`
            : null}
        </div>`
      : null}
  </details>`;
}

function Roster({ roster }) {
  const tables = Object.entries(roster).filter(([, rows]) => Object.keys(rows).length);
  if (!tables.length) return html`<p class="muted">${t("scene_nothing")}</p>`;
  return html`<div class="grid2">${tables.map(
    ([table, rows]) => html`<div key=${table}><h3>${t(`roster_${table}`)}</h3><table><tbody>
      ${Object.entries(rows).map(([name, when]) => html`<tr><td>${name}</td><td class="muted">${when}</td></tr>`)}
    </tbody></table></div>`,
  )}</div>`;
}

export function Scene({ story }) {
  const [result, setResult] = useState(null);
  const [scene, error, reload] = useLoad(() => get(`/stories/${story.id}/scene`), [story.id, story.version, story.leaf_id]);
  if (error) return html`<${Problem} error=${error} onRetry=${reload} />`;
  if (!scene) return html`<${Loading} />`;
  const s = scene.state;
  const present = new Set(scene.present);
  const characters = Object.entries(s.characters || {});
  return html`<div class="scene" data-testid="scene">
    <div class="grid2">
      <div class="card-box"><h3>${t("scene_time")}</h3><p data-testid="scene-time-shown">${s.time || html`<span class="muted">—</span>`}</p></div>
      <div class="card-box"><h3>${t("scene_location")}</h3><p data-testid="scene-location-shown">${s.location || html`<span class="muted">—</span>`}</p></div>
    </div>
    <div class="card-box"><h3>${t("scene_characters")}</h3>
      ${characters.length
        ? html`<table data-testid="scene-characters"><thead><tr><th>${t("scene_name")}</th><th>${t("scene_at")}</th><th>${t("scene_status")}</th><th>${t("scene_affinity")}</th><th>${t("scene_notes")}</th></tr></thead><tbody>
            ${characters.map(([name, c]) => html`<tr key=${name}>
              <td>${name} <span class=${"badge" + (present.has(name) ? " on" : "")}>${present.has(name) ? t("scene_present") : t("scene_absent")}</span></td>
              <td>${c.at || ""}</td><td>${c.status || ""}</td><td>${c.affinity ?? ""}</td><td>${c.notes || ""}</td></tr>`)}
          </tbody></table>`
        : html`<p class="muted">${t("scene_nothing")}</p>`}
    </div>
    <div class="grid2">
      <div class="card-box"><h3>${t("scene_inventory")}</h3>
        ${(s.inventory || []).length ? html`<ul>${s.inventory.map((i) => html`<li>${i}</li>`)}</ul>` : html`<p class="muted">${t("scene_nothing")}</p>`}</div>
      <div class="card-box"><h3>${t("scene_threads")}</h3>
        ${(s.plot_threads || []).length ? html`<ul data-testid="scene-threads">${s.plot_threads.map((p) => html`<li>${p}</li>`)}</ul>` : html`<p class="muted">${t("scene_nothing")}</p>`}</div>
    </div>
    ${Object.keys(s.flags || {}).length
      ? html`<div class="card-box"><h3>${t("scene_flags")}</h3><pre>${JSON.stringify(s.flags, null, 2)}</pre></div>`
      : null}
    <div class="card-box"><h3>${t("scene_roster")}</h3><${Roster} roster=${scene.roster} /></div>
    <${Drift} story=${story} />
    <${Editor} key=${scene.at + (scene.patches.length ? scene.patches[scene.patches.length - 1].seq : "")} scene=${scene} onPatched=${reload} result=${result} setResult=${setResult} />
  </div>`;
}
