// A story's memory (its Memory tab) and a card's memory. StoryMemory shows the summary layers of the
// story's path (the digest and its sections, the episodes, the turns still word for word), each editable
// in place, with "Compact now". CardMemory shows what the card's stories left behind (the resident summary,
// the handbook and its items with the stories behind them, each story's recap), edited with If-Match: a
// stale edit keeps the user's text and offers the newer version beside it.
import { useId, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { register, t } from "./i18n.js";
import { get, patch, post, put, request } from "./api.js";
import { Loading, Problem, attempt, short, useLoad } from "./ui.js";

register({
  en: {
    memory_summaries: "Summaries",
    memory_compact: "Compact now",
    memory_compacting: "Compacting…",
    memory_uncovered: "{n} turns below the last summary are sent word for word.",
    memory_no_summaries: "No summary yet: the whole path is sent word for word (or cut to fit).",
    memory_digest: "Digest",
    memory_episodes: "Episodes",
    memory_episode: "Episode",
    memory_turns: "turns {a}–{b}",
    memory_nodes: "path depths {a}–{b}",
    memory_author: "by {who}",
    memory_edited: "edited",
    memory_edit: "Edit",
    memory_save: "Save",
    memory_saving: "Saving…",
    memory_cancel: "Cancel",
    memory_empty_text: "(empty)",
    memory_stale:
      "Not saved: this memory changed since you began editing (a sync, another tab or another person saved first). Your text is kept below.",
    memory_show_newer: "Show the newer version",
    memory_newer: "The newer version",
    memory_use_newer: "Use the newer version instead of mine",
    memory_newer_hint: "Save now writes your text over the newer version.",
    memory_sec_前情提要: "Story so far",
    memory_sec_人物: "Characters",
    memory_sec_承诺与伏笔: "Promises and foreshadowing",
    memory_sec_事实账: "Facts ledger",
    memory_sec_当前场景: "Current scene",
    memory_card: "The card's memory",
    memory_card_off: "This story does not use the card's memory (its setting card_memory is off).",
    memory_version: "version {v}",
    memory_merged: "merged {when} by {who}",
    memory_merge_due: "merge due",
    memory_sync: "Sync now",
    memory_syncing: "Syncing…",
    memory_synced: "Recapped {r}, forgot {f}, remembered {m}; {merged}.",
    memory_merged_yes: "merged",
    memory_merged_no: "nothing to merge",
    memory_none: "None of this card's stories has been recapped yet. Sync now recaps them.",
    memory_resident: "Resident summary",
    memory_resident_hint: "What a new story of this card starts with.",
    memory_handbook: "Handbook",
    memory_handbook_text: "The handbook as text",
    memory_handbook_hint: "Each item ends with the tags of its stories; an item without a tag is refused.",
    memory_items_none: "No cross-story items yet.",
    memory_section_characters: "Characters",
    memory_section_facts: "Established facts",
    memory_section_preferences: "Play preferences",
    memory_sources: "Sources",
    memory_hide_sources: "Hide sources",
    memory_read: "read turns {a}–{b} ({n} turns)",
    memory_read_n: "read {n} turns",
    memory_recap_text: "The recap",
    memory_open_story: "Open the story",
    memory_recaps: "Recaps",
    memory_recaps_none: "No recap yet.",
    memory_forgotten: "forgotten",
    memory_this_story: "this story",
    memory_written: "written {when}",
    memory_forget: "Forget this story's memory",
    memory_forget_confirm:
      "Forget what this story left in the card's memory? It stays forgotten even if the story is restored.",
    memory_forget_none: "The card's memory holds nothing of this story yet.",
  },
  zh: {
    memory_summaries: "摘要",
    memory_compact: "立即压缩",
    memory_compacting: "压缩中…",
    memory_uncovered: "最后一段摘要之后的 {n} 轮按原文发送。",
    memory_no_summaries: "还没有摘要：整条路径按原文发送（放不下时截断）。",
    memory_digest: "总纲",
    memory_episodes: "分段摘要",
    memory_episode: "分段",
    memory_turns: "第 {a}–{b} 轮",
    memory_nodes: "路径深度 {a}–{b}",
    memory_author: "作者：{who}",
    memory_edited: "已编辑",
    memory_edit: "编辑",
    memory_save: "保存",
    memory_saving: "保存中…",
    memory_cancel: "取消",
    memory_empty_text: "（空）",
    memory_stale: "未保存：你开始编辑之后，这份记忆已被改动（同步、其他标签页或其他人先保存了）。你写的内容保留在下面。",
    memory_show_newer: "查看较新的版本",
    memory_newer: "较新的版本",
    memory_use_newer: "改用较新的版本（放弃我的）",
    memory_newer_hint: "现在保存会用你的文字覆盖较新的版本。",
    memory_sec_前情提要: "前情提要",
    memory_sec_人物: "人物",
    memory_sec_承诺与伏笔: "承诺与伏笔",
    memory_sec_事实账: "事实账",
    memory_sec_当前场景: "当前场景",
    memory_card: "角色卡的记忆",
    memory_card_off: "这个故事不使用角色卡的记忆（设置 card_memory 已关闭）。",
    memory_version: "版本 {v}",
    memory_merged: "{when} 由 {who} 合并",
    memory_merge_due: "待合并",
    memory_sync: "立即同步",
    memory_syncing: "同步中…",
    memory_synced: "回顾 {r} 局，遗忘 {f} 局，恢复 {m} 局；{merged}。",
    memory_merged_yes: "已合并",
    memory_merged_no: "无需合并",
    memory_none: "这张卡的故事还没有被回顾过。点“立即同步”来回顾。",
    memory_resident: "常驻摘要",
    memory_resident_hint: "这张卡的新故事开局时带上的内容。",
    memory_handbook: "手册",
    memory_handbook_text: "手册全文",
    memory_handbook_hint: "每一条以它所属故事的标签结尾；没有标签的条目会被拒绝。",
    memory_items_none: "还没有跨局条目。",
    memory_section_characters: "人物",
    memory_section_facts: "既定事实",
    memory_section_preferences: "玩法偏好",
    memory_sources: "来源",
    memory_hide_sources: "收起来源",
    memory_read: "读了第 {a}–{b} 轮（共 {n} 轮）",
    memory_read_n: "读了 {n} 轮",
    memory_recap_text: "回顾全文",
    memory_open_story: "打开故事",
    memory_recaps: "各局回顾",
    memory_recaps_none: "还没有回顾。",
    memory_forgotten: "已遗忘",
    memory_this_story: "本故事",
    memory_written: "写于 {when}",
    memory_forget: "遗忘本故事的记忆",
    memory_forget_confirm: "要从角色卡的记忆中遗忘这个故事留下的内容吗？即使以后恢复这个故事，它也保持遗忘。",
    memory_forget_none: "角色卡的记忆里还没有这个故事的内容。",
  },
});

const DIGEST_ORDER = ["前情提要", "人物", "承诺与伏笔", "事实账", "当前场景"];
const ITEM_SECTIONS = ["characters", "facts", "preferences"];

function when(stamp) {
  return stamp ? new Date(stamp).toLocaleString(undefined, { dateStyle: "short", timeStyle: "short" }) : "";
}

// A text shown as it is, with an Edit button that turns it into a textarea with Save and Cancel.
// `onSave(text, base)` saves (base: {original, token} as they were when the edit began or the newer
// version was shown); a 409 keeps the text and, with `onNewer()` → {text, token}, shows the newer beside it.
function Editable({ value, token, label, testid, onSave, onNewer, rows = 4, mono = false }) {
  const id = useId();
  const [draft, setDraft] = useState(null);
  const [base, setBase] = useState(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const [newer, setNewer] = useState(null);
  const start = () => {
    setDraft(value);
    setBase({ original: value, token });
    setError(null);
    setNewer(null);
  };
  const stop = () => {
    setDraft(null);
    setError(null);
    setNewer(null);
  };
  const save = async () => {
    setBusy(true);
    setError(null);
    try {
      await onSave(draft, base);
      stop();
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  const showNewer = async () => {
    const found = await attempt(onNewer);
    if (!found) return;
    setNewer(found.text);
    setBase({ original: found.text, token: found.token });
  };
  const useNewer = () => {
    setDraft(newer);
    setError(null);
    setNewer(null);
  };
  const stale = error && error.status === 409;
  if (draft === null) {
    return html`<div class="memory-text" data-testid=${testid}>
      <div class=${mono ? "memory-shown mono" : "memory-shown"}>${value || html`<span class="muted">${t("memory_empty_text")}</span>`}</div>
      <button type="button" onClick=${start} aria-label=${`${t("memory_edit")}: ${label}`} data-testid=${`${testid}-edit`}>
        ${t("memory_edit")}
      </button>
    </div>`;
  }
  return html`<div class="memory-text editing" data-testid=${testid}>
    ${stale
      ? html`<div class="problem memory-stale" role="alert" data-testid="memory-stale">
          <p>${t("memory_stale")}</p>
          ${onNewer && newer === null
            ? html`<button type="button" onClick=${showNewer} data-testid="memory-show-newer">${t("memory_show_newer")}</button>`
            : null}
        </div>`
      : html`<${Problem} error=${error} />`}
    <div class=${newer === null ? "memory-edit" : "memory-edit memory-compare"}>
      <div>
        <label for=${id}>${label}</label>
        <textarea id=${id} rows=${rows} class=${mono ? "mono" : ""} value=${draft} disabled=${busy}
          onInput=${(e) => setDraft(e.target.value)} data-testid=${`${testid}-input`}></textarea>
      </div>
      ${newer === null
        ? null
        : html`<div class="memory-newer" data-testid="memory-newer">
            <div class="memory-newer-head">${t("memory_newer")}</div>
            <div class=${mono ? "memory-shown mono" : "memory-shown"}>${newer}</div>
            <button type="button" onClick=${useNewer} data-testid="memory-use-newer">${t("memory_use_newer")}</button>
          </div>`}
    </div>
    ${newer !== null ? html`<p class="muted">${t("memory_newer_hint")}</p>` : null}
    <div class="row">
      <button type="button" class="primary" onClick=${save} disabled=${busy} data-testid=${`${testid}-save`}>
        ${busy ? t("memory_saving") : t("memory_save")}
      </button>
      <button type="button" onClick=${stop} disabled=${busy}>${t("memory_cancel")}</button>
    </div>
  </div>`;
}

function Badges({ author, edited }) {
  return html`<span class="badge">${t("memory_author", { who: author })}</span>
    ${edited ? html` <span class="badge memory-edited">${t("memory_edited")}</span>` : null}`;
}

function Digest({ digest, onSave }) {
  const names = [
    ...DIGEST_ORDER.filter((n) => n in digest.sections),
    ...Object.keys(digest.sections).filter((n) => !DIGEST_ORDER.includes(n)),
  ];
  return html`<article class="card-box memory-digest" data-testid="memory-digest">
    <header class="row">
      <h3 class="grow">${t("memory_digest")}</h3>
      <span>${t("memory_turns", { a: 0, b: digest.last_turn })}</span>
      <span class="muted">${t("memory_nodes", { a: digest.covers[0], b: digest.covers[1] })}</span>
      <${Badges} author=${digest.author} edited=${digest.edited} />
    </header>
    ${names.map((name) => {
      const gloss = t(`memory_sec_${name}`);
      const label = gloss.startsWith("memory_sec_") || gloss === name ? name : `${gloss} · ${name}`;
      return html`<section class="memory-section" key=${name}>
        <h4>${label}</h4>
        <${Editable} value=${digest.sections[name]} label=${label} testid="memory-digest-section" rows=${5}
          onSave=${(text) => onSave(digest.node_id, { sections: { [name]: text } })} />
      </section>`;
    })}
  </article>`;
}

function Episode({ episode, onSave }) {
  const label = `${t("memory_episode")} ${t("memory_turns", { a: episode.first_turn, b: episode.last_turn })}`;
  return html`<li class="memory-episode" data-testid="memory-episode">
    <div class="row">
      <strong class="grow">${t("memory_turns", { a: episode.first_turn, b: episode.last_turn })}</strong>
      <span class="muted">${t("memory_nodes", { a: episode.covers[0], b: episode.covers[1] })}</span>
      <${Badges} author=${episode.author} edited=${episode.edited} />
    </div>
    <${Editable} value=${episode.text} label=${label} testid="memory-episode-text" rows=${6}
      onSave=${(text) => onSave(episode.node_id, { text })} />
  </li>`;
}

export function StoryMemory({ story, reload }) {
  const [layers, error, reloadLayers, setLayers] = useLoad(() => get(`/stories/${story.id}/summaries`), [story.id]);
  const [compacting, setCompacting] = useState(false);
  const [done, setDone] = useState(null);
  const [compactError, setCompactError] = useState(null);
  const compact = async () => {
    setCompacting(true);
    setDone(null);
    setCompactError(null);
    try {
      const answer = await post(`/stories/${story.id}/compact`, {});
      setDone(answer.done);
      setLayers(answer);
      reloadLayers();
      if (reload) reload();
    } catch (failure) {
      setCompactError(failure);
    } finally {
      setCompacting(false);
    }
  };
  const saveSummary = async (nodeId, body) => {
    setLayers(await patch(`/nodes/${nodeId}/summary`, body));
    if (reload) reload();
  };
  return html`<div class="memory" data-testid="memory">
    <section class="memory-summaries" data-testid="memory-summaries">
      <div class="row">
        <h2 class="grow">${t("memory_summaries")}</h2>
        <button type="button" class="primary" onClick=${compact} disabled=${compacting} data-testid="memory-compact">
          ${compacting ? t("memory_compacting") : t("memory_compact")}
        </button>
      </div>
      ${done ? html`<p class="memory-done" role="status" data-testid="memory-compact-done">${done}</p>` : null}
      <${Problem} error=${compactError} />
      <${Problem} error=${error} onRetry=${reloadLayers} />
      ${layers ? html`<${Layers} layers=${layers} onSave=${saveSummary} />` : error ? null : html`<${Loading} />`}
    </section>
    <section class="memory-card-part">
      ${story.settings && story.settings.card_memory === false
        ? html`<p class="muted" data-testid="memory-card-off">${t("memory_card_off")}</p>`
        : null}
      <${CardMemory} cardId=${story.card_id} storyId=${story.id} />
    </section>
  </div>`;
}

function Layers({ layers, onSave }) {
  const none = !layers.digest && layers.episodes.length === 0;
  return html`<div>
    <p class="muted" data-testid="memory-uncovered">
      ${none ? t("memory_no_summaries") + " " : ""}${t("memory_uncovered", { n: layers.uncovered_turns })}
    </p>
    ${layers.digest ? html`<${Digest} digest=${layers.digest} onSave=${onSave} />` : null}
    ${layers.episodes.length
      ? html`<h3>${t("memory_episodes")}</h3>
          <ol class="list memory-episodes">
            ${layers.episodes.map((e) => html`<${Episode} key=${e.node_id} episode=${e} onSave=${onSave} />`)}
          </ol>`
      : null}
  </div>`;
}

// The title a story goes by in the card's memory: its handbook block's, else its recap's heading.
function titleOf(memory, storyId) {
  const block = memory.handbook.blocks.find((b) => b.story_id === storyId);
  if (block && block.title) return block.title;
  const recap = memory.recaps.find((r) => r.story_id === storyId);
  const heading = recap && /^#\s*(.+)$/m.exec(recap.text);
  return heading ? heading[1].trim() : short(storyId);
}

export function CardMemory({ cardId, storyId }) {
  const [state, error, reloadMemory, setState] = useLoad(async () => {
    const answer = await request("GET", `/cards/${cardId}/memory`);
    return { memory: answer.data, etag: answer.etag };
  }, [cardId]);
  const latest = useRef(state);
  latest.current = state;
  const [syncing, setSyncing] = useState(false);
  const [synced, setSynced] = useState(null);
  const show = (memory, etag) => setState({ memory, etag: etag || `"${memory.version}"` });

  const sync = async () => {
    setSyncing(true);
    setSynced(null);
    const answer = await attempt(() => post(`/cards/${cardId}/memory/sync`));
    setSyncing(false);
    if (!answer) return;
    show(answer.memory);
    setSynced(answer);
  };
  // An edit goes with the version it began from, or the newest known when that field has not changed since.
  const saver = (path, field) => async (text, base) => {
    const now = latest.current;
    const ifMatch = now && field(now.memory) === base.original ? now.etag : base.token;
    const answer = await request("PUT", `/cards/${cardId}${path}`, { body: { text }, ifMatch });
    show(answer.data, answer.etag);
  };
  const newer = (field) => async () => {
    const answer = await request("GET", `/cards/${cardId}/memory`);
    show(answer.data, answer.etag);
    return { text: field(answer.data), token: answer.etag };
  };
  const forget = async () => {
    if (!confirm(t("memory_forget_confirm"))) return;
    const memory = await attempt(() => post(`/cards/${cardId}/memory/forget`, { story_id: storyId }));
    if (memory) show(memory);
  };

  if (!state) return error ? html`<${Problem} error=${error} onRetry=${reloadMemory} />` : html`<${Loading} />`;
  const { memory, etag } = state;
  const mine = storyId ? memory.recaps.find((r) => r.story_id === storyId) : null;
  const resident = (m) => m.resident;
  const handbook = (m) => m.handbook.text;
  return html`<section class="memory-card" data-testid="card-memory">
    <div class="row">
      <h2 class="grow">${t("memory_card")}</h2>
      <span class="badge" data-testid="memory-version">${t("memory_version", { v: memory.version })}</span>
      ${memory.merged_at
        ? html`<span class="muted">${t("memory_merged", { when: when(memory.merged_at), who: memory.merged_by })}</span>`
        : null}
      ${memory.merge_due ? html`<span class="badge memory-due">${t("memory_merge_due")}</span>` : null}
      <button type="button" onClick=${sync} disabled=${syncing} data-testid="memory-sync">
        ${syncing ? t("memory_syncing") : t("memory_sync")}
      </button>
    </div>
    ${synced
      ? html`<p class="memory-done" role="status" data-testid="memory-synced">
          ${t("memory_synced", {
            r: synced.recapped,
            f: synced.forgotten,
            m: synced.remembered,
            merged: synced.merged ? t("memory_merged_yes") : t("memory_merged_no"),
          })}
        </p>`
      : null}
    <${Problem} error=${error} onRetry=${reloadMemory} />
    ${memory.version === 0 ? html`<p class="muted">${t("memory_none")}</p>` : null}

    <h3>${t("memory_resident")}</h3>
    <p class="muted">${t("memory_resident_hint")}</p>
    <${Editable} value=${memory.resident} token=${etag} label=${t("memory_resident")} testid="memory-resident" rows=${8}
      onSave=${saver("/memory/resident", resident)} onNewer=${newer(resident)} />

    <h3>${t("memory_handbook")}</h3>
    <${Items} memory=${memory} cardId=${cardId} storyId=${storyId} />
    <h4>${t("memory_handbook_text")}</h4>
    <p class="muted">${t("memory_handbook_hint")}</p>
    <${Editable} value=${memory.handbook.text} token=${etag} label=${t("memory_handbook_text")} testid="memory-handbook"
      rows=${14} mono=${true} onSave=${saver("/memory/handbook", handbook)} onNewer=${newer(handbook)} />

    <h3>${t("memory_recaps")}</h3>
    ${memory.recaps.length === 0 ? html`<p class="muted">${t("memory_recaps_none")}</p>` : null}
    <ul class="list memory-recaps">
      ${memory.recaps.map((recap) => {
        const text = (m) => (m.recaps.find((r) => r.story_id === recap.story_id) || {}).text;
        return html`<${Recap} key=${recap.story_id} recap=${recap} title=${titleOf(memory, recap.story_id)}
          here=${recap.story_id === storyId} etag=${etag}
          onSave=${saver(`/memory/recaps/${recap.story_id}`, text)} onNewer=${newer(text)} />`;
      })}
    </ul>

    ${storyId
      ? html`<div class="row memory-forget">
          <button type="button" class="danger" onClick=${forget} disabled=${!mine || mine.forgotten}
            data-testid="memory-forget">${t("memory_forget")}</button>
          ${!mine ? html`<span class="muted">${t("memory_forget_none")}</span>` : null}
          ${mine && mine.forgotten ? html`<span class="badge">${t("memory_forgotten")}</span>` : null}
        </div>`
      : null}
  </section>`;
}

function Recap({ recap, title, here, etag, onSave, onNewer }) {
  return html`<li class=${here ? "memory-recap here" : "memory-recap"} data-testid="memory-recap">
    <div class="row">
      <a class="grow" href=${`#/stories/${recap.story_id}/play`}>${title}</a>
      ${here ? html`<span class="badge">${t("memory_this_story")}</span>` : null}
      ${recap.forgotten ? html`<span class="badge memory-forgotten">${t("memory_forgotten")}</span>` : null}
      <span class="badge">${t("memory_author", { who: recap.author })}</span>
      <span class="badge">v${recap.version}</span>
      <span class="muted">${t("memory_read_n", { n: recap.turns })} · ${t("memory_written", { when: when(recap.written_at) })}</span>
    </div>
    <${Editable} value=${recap.text} token=${etag} label=${`${t("memory_recap_text")}: ${title}`} testid="memory-recap-text"
      rows=${10} mono=${true} onSave=${onSave} onNewer=${onNewer} />
  </li>`;
}

function Items({ memory, cardId, storyId }) {
  const items = memory.handbook.items;
  if (items.length === 0) return html`<p class="muted">${t("memory_items_none")}</p>`;
  return html`<div class="memory-items">
    ${ITEM_SECTIONS.filter((s) => items.some((i) => i.section === s)).map(
      (section) => html`<div key=${section}>
        <h4>${t(`memory_section_${section}`)}</h4>
        <ul class="list">
          ${items
            .filter((i) => i.section === section)
            .map((item) => html`<${Item} key=${item.item_id} item=${item} memory=${memory} cardId=${cardId} storyId=${storyId} />`)}
        </ul>
      </div>`,
    )}
  </div>`;
}

function Item({ item, memory, cardId, storyId }) {
  const [open, setOpen] = useState(false);
  return html`<li class="memory-item" data-testid="memory-item">
    <div class="row">
      <span class="grow">${item.text}</span>
      ${item.sources.map(
        (s) => html`<span class=${s === storyId ? "badge memory-source here" : "badge memory-source"} key=${s}>
          ${titleOf(memory, s)}
        </span>`,
      )}
      <button type="button" class="link" aria-expanded=${open} onClick=${() => setOpen(!open)} data-testid="memory-item-sources">
        ${open ? t("memory_hide_sources") : t("memory_sources")}
      </button>
    </div>
    ${open ? html`<${Audit} cardId=${cardId} itemId=${item.item_id} memory=${memory} />` : null}
  </li>`;
}

// The recaps behind an item, each with the span of its story's path it read (its first and last node's turns).
function Audit({ cardId, itemId, memory }) {
  const [audit, error, reload] = useLoad(async () => {
    const found = await get(`/cards/${cardId}/memory/items/${itemId}`);
    const turnOf = async (nodeId) => (nodeId ? (await get(`/nodes/${nodeId}`)).turn : null);
    const spans = await Promise.all(
      found.sources.map(async (s) => {
        try {
          return [await turnOf(s.recap.first_node_id), await turnOf(s.recap.last_node_id)];
        } catch {
          return [null, null]; // the story was deleted: its recap's count of turns is all there is
        }
      }),
    );
    return { ...found, spans };
  }, [cardId, itemId, memory.version]);
  if (error) return html`<${Problem} error=${error} onRetry=${reload} />`;
  if (!audit) return html`<${Loading} />`;
  return html`<ul class="memory-audit" data-testid="memory-audit">
    ${audit.sources.map((s, n) => {
      const [a, b] = audit.spans[n];
      return html`<li key=${s.story_id}>
        <a href=${`#/stories/${s.story_id}/play`} data-testid="memory-audit-story">${titleOf(memory, s.story_id)}</a>
        <span class="mono muted"> ${short(s.story_id)}</span>
        ${" · "}<span>${a !== null && b !== null ? t("memory_read", { a, b, n: s.recap.turns }) : t("memory_read_n", { n: s.recap.turns })}</span>
        ${s.recap.forgotten ? html` <span class="badge">${t("memory_forgotten")}</span>` : null}
        <details>
          <summary>${t("memory_recap_text")} (${t("memory_author", { who: s.recap.author })}, v${s.recap.version})</summary>
          <div class="memory-shown mono">${s.recap.text}</div>
        </details>
      </li>`;
    })}
  </ul>`;
}
