// On a card's page: the character's keeping — the identity anchor its stories are re-anchored with (the
// one derived from the card shown while none is written), how often, and the patterns no reply should
// match. Saved as the card's settings; a pattern that is not a regular expression is refused and said.
import { useState } from "preact/hooks";
import { html } from "./html.js";
import { register, t } from "./i18n.js";
import { patch } from "./api.js";
import { attempt } from "./ui.js";

register({
  en: {
    anchor_title: "Keeping the character", anchor_label: "Identity anchor (who the character is, and the iron rules)",
    anchor_derived: "Derived from the card while this is empty:", anchor_every: "Re-anchor every N turns (0: off)",
    anchor_banned: "Patterns no reply should match (regular expressions, one per line)", anchor_save: "Save",
    anchor_saved: "Saved",
  },
  zh: {
    anchor_title: "守住角色", anchor_label: "身份锚点（角色是谁、始终遵守的铁律）",
    anchor_derived: "留空时，由角色卡推导为：", anchor_every: "每隔几轮重申一次身份（0 为关闭）",
    anchor_banned: "回复里不该出现的写法（正则表达式，每行一个）", anchor_save: "保存", anchor_saved: "已保存",
  },
});

export function AnchorEditor({ card, onSaved }) {
  const settings = card.settings;
  const [anchor, setAnchor] = useState(settings.identity_anchor || "");
  const [every, setEvery] = useState(String(settings.reanchor_turns));
  const [banned, setBanned] = useState((settings.banned_patterns || []).join("\n"));
  const [saved, setSaved] = useState(false);
  const save = async () => {
    setSaved(false);
    const body = {
      settings: {
        identity_anchor: anchor.trim(),
        reanchor_turns: Number.parseInt(every, 10) || 0,
        banned_patterns: banned.split("\n").map((line) => line.trim()).filter(Boolean),
      },
    };
    const answer = await attempt(() => patch(`/cards/${card.id}`, body));
    if (answer) {
      setSaved(true);
      onSaved(answer);
    }
  };
  return html`<details class="card-box anchor-edit" data-testid="anchor-edit">
    <summary>${t("anchor_title")}</summary>
    <label for="anchor-text">${t("anchor_label")}</label>
    <textarea id="anchor-text" data-testid="anchor-text" rows="4" value=${anchor} placeholder=${card.anchor}
      onInput=${(e) => setAnchor(e.target.value)}></textarea>
    ${settings.identity_anchor ? null : html`<p class="muted">${t("anchor_derived")}</p><pre class="wrap" data-testid="anchor-derived">${card.anchor}</pre>`}
    <label for="anchor-every">${t("anchor_every")}</label>
    <input id="anchor-every" data-testid="anchor-every" type="number" min="0" value=${every} onInput=${(e) => setEvery(e.target.value)} />
    <label for="anchor-banned">${t("anchor_banned")}</label>
    <textarea id="anchor-banned" class="mono" data-testid="anchor-banned" rows="3" value=${banned} onInput=${(e) => setBanned(e.target.value)}></textarea>
    <button class="primary" data-testid="anchor-save" onClick=${save}>${t("anchor_save")}</button>
    ${saved ? html`<span class="muted" data-testid="anchor-saved"> ${t("anchor_saved")}</span>` : null}
  </details>`;
}
