// The character's keeping, beside the scene: the drift signals judged at the leaf's reply (each with its
// value against its threshold, and what it saw), whether the next turn re-anchors the character (forced
// by two or more signals, or the periodic one), and the identity anchor the re-anchoring carries.
import { html } from "./html.js";
import { register, t } from "./i18n.js";
import { get } from "./api.js";
import { Loading, Problem, useLoad } from "./ui.js";

register({
  en: {
    drift_title: "Keeping the character", drift_signal: "signal", drift_value: "value", drift_threshold: "threshold",
    drift_seen: "what it saw", drift_fired: "fired", drift_quiet: "quiet", drift_off: "off",
    drift_creep: "length creep", drift_banned: "banned pattern", drift_repeat: "repeated phrase",
    drift_language: "language switch", drift_echo: "echo of the user",
    drift_none: "No reply yet to judge.", drift_at: "Judged at the reply of turn {turn}",
    drift_forced: "The next turn carries a forced re-anchoring", drift_not_forced: "No forced re-anchoring next turn",
    drift_periodic: "Periodic re-anchoring: next at turn {turn}", drift_periodic_off: "Periodic re-anchoring is off",
    drift_anchor: "Identity anchor", drift_derived: "derived from the card (write your own in the card's settings)",
  },
  zh: {
    drift_title: "守住角色", drift_signal: "信号", drift_value: "数值", drift_threshold: "阈值",
    drift_seen: "看到了什么", drift_fired: "触发", drift_quiet: "未触发", drift_off: "关闭",
    drift_creep: "篇幅膨胀", drift_banned: "禁用写法", drift_repeat: "重复短语",
    drift_language: "换了语言", drift_echo: "复述对方",
    drift_none: "还没有可以判断的回复。", drift_at: "判断的是第 {turn} 轮的回复",
    drift_forced: "下一轮会强制重申身份", drift_not_forced: "下一轮不强制重申",
    drift_periodic: "定期重申：下一次在第 {turn} 轮", drift_periodic_off: "定期重申已关闭",
    drift_anchor: "身份锚点", drift_derived: "由角色卡推导（可在角色卡设置里自己写）",
  },
});

function Signals({ drift }) {
  return html`<div class="drift-scroll"><table data-testid="drift-signals"><thead><tr>
      <th>${t("drift_signal")}</th><th>${t("drift_value")}</th><th>${t("drift_threshold")}</th><th></th><th>${t("drift_seen")}</th>
    </tr></thead><tbody>
    ${drift.signals.map((s) => html`<tr key=${s.name} data-testid=${`drift-${s.name}`} class=${s.fired ? "fired" : ""}>
      <td>${t(`drift_${s.name}`)}</td><td>${s.value}</td><td>${s.threshold || t("drift_off")}</td>
      <td><span class=${"badge" + (s.fired ? " warn" : "")}>${s.fired ? t("drift_fired") : t("drift_quiet")}</span></td>
      <td class="muted">${s.detail}</td></tr>`)}
  </tbody></table></div>`;
}

export function Drift({ story }) {
  const [drift, error, reload] = useLoad(() => get(`/stories/${story.id}/drift`), [story.id, story.version, story.leaf_id]);
  if (error) return html`<${Problem} error=${error} onRetry=${reload} />`;
  if (!drift) return html`<${Loading} />`;
  return html`<div class="card-box drift" data-testid="drift"><h3>${t("drift_title")}</h3>
    ${drift.reply_id ? html`<p class="muted">${t("drift_at", { turn: drift.turn })}</p><${Signals} drift=${drift} />` : html`<p class="muted">${t("drift_none")}</p>`}
    <p data-testid="drift-forced"><strong>${drift.forced ? t("drift_forced") : t("drift_not_forced")}</strong></p>
    <p class="muted" data-testid="drift-periodic">${drift.reanchor_turns ? t("drift_periodic", { turn: drift.next_periodic_turn }) : t("drift_periodic_off")}</p>
    <details data-testid="drift-anchor"><summary>${t("drift_anchor")}${drift.anchor_derived ? html` <span class="muted">(${t("drift_derived")})</span>` : null}</summary>
      <pre class="wrap">${drift.anchor}</pre></details>
  </div>`;
}
