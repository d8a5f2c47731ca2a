"""Every fixed text changji writes into the main model's context, in Chinese and in English.

`CONTEXT_TEXTS[language]` holds them; the system prompt, the summary layers, the scene, recall and lore
blocks take theirs from it. (The side models' instructions live beside their requests, in both languages
too: `schedulers/workers/scribe.py`, `schedulers/workers/summary_prompts.py`; the main model's tool answers
in `domain/tree/draft_tools.py`, its draft rules in `engine/tool_schemas.py`.) Digest sections are stored under
their canonical (Chinese) names, which events keep for ever; `digest_headings` is how each is shown."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from domain.language import Language


@dataclass(frozen=True, slots=True)
class ContextTexts:
    language: Language
    # the system prompt
    card_instructions: str
    playing: str  # {name}
    personality: str
    scenario: str
    examples: str
    user_plays: str  # {user}
    lore_constant: str
    # the last user message
    card_tail: str
    # the summary message
    summary_opener: str
    episode_label: str  # {first} {last}
    anchors: str
    anchor_line: str  # {turn} {speaker} {text}
    shortened: str  # a summary cut to the budget of a request (a proxied client's small one)
    digest_headings: Mapping[str, str]
    resident_opener: str  # {char} {user}: the message opens with the card's memory (no summary of this story yet)
    resident_heading: str  # {char} {user}: the card's memory after this story's own summary
    memory_opener: str  # what the card's memory holds that bears on the user's words
    prelude_heading: str  # the recap of the earlier story a story was started from
    # recall
    recall_opener: str
    recall_summary_line: str  # {first} {last} {text}
    recall_turn_line: str  # {turn} {hidden} {parts}
    recall_hidden: str
    recall_date: str  # {date}: when a recalled turn was said, where that is another day than this turn's
    recall_today: str  # {date}: this turn's day, named where a recalled line carries another
    # lore
    lore_hits: str
    lore_index: str  # the model can look entries up (engine mode)
    lore_index_plain: str  # it cannot (bring-your-own mode)
    lore_more: str  # {count}
    # the scene
    world_state: str
    roster: str
    roster_labels: Mapping[str, str]
    empty_state: str
    empty_roster: str
    time: str
    place: str
    items: str
    threads: str
    affinity: str  # {value}
    status: str
    present: str
    elsewhere: str
    notes: str
    # punctuation
    said: str  # {speaker} {text}
    label: str  # {label} {value}
    list_sep: str
    part_sep: str
    thread: str  # {text}
    first_seen: str  # {name} {time}

    def speech(self, speaker: str, text: str) -> str:
        return self.said.format(speaker=speaker, text=text)

    def labelled(self, label: str, value: str) -> str:
        return self.label.format(label=label, value=value)


ZH = ContextTexts(
    language="zh",
    card_instructions="# 卡作者附加指令（优先级最高）",
    playing="# 你扮演的角色：{name}",
    personality="## 性格",
    scenario="## 当前场景",
    examples="## 对白示例（仅示范口吻，不是已发生的剧情）",
    user_plays="# 用户扮演：{user}",
    lore_constant="# 世界设定",
    card_tail="【卡作者末端指令】",
    shortened="……（篇幅所限，以下从略）",
    summary_opener="【前情提要】以下是更早剧情的接力摘要，是既定事实：",
    episode_label="### 第{first}–{last}轮",
    anchors="【锚点原文】",
    resident_opener="【前情提要】以下是{char}与{user}此前几段故事留下的记忆，是既定事实（不是本故事里新发生的事）：",
    prelude_heading="### 上一段故事（本故事接着它开始）",
    memory_opener="【往事回忆】此前几段故事里与本轮有关的记忆（是既定事实，不是本故事里新发生的事）：",
    resident_heading="【往事】{char}与{user}此前几段故事留下的记忆（既定事实，不是本故事里新发生的事）：",
    anchor_line="- 第{turn}轮 {speaker}：{text}",
    digest_headings={name: name for name in ("前情提要", "人物", "承诺与伏笔", "事实账", "当前场景")},
    recall_opener="【剧情记忆】与本轮有关的早前片段（按剧情先后，仅供回忆，不是新发生的事）：",
    recall_summary_line="- 第{first}–{last}轮（摘要） {text}",
    recall_turn_line="- 第{turn}轮{hidden} {parts}",
    recall_hidden="（已隐藏）",
    recall_date="（{date}）",
    recall_today="（本轮在{date}）",
    lore_hits="【设定】本轮提到的设定条目：",
    lore_index="【设定索引】其他条目（需要时用 lorebook_search 查阅）：",
    lore_index_plain="【设定索引】其他条目：",
    lore_more="（另 {count} 条未列出）",
    world_state="【世界状态】",
    roster="【登场名录】",
    roster_labels={"characters": "人物", "places": "地点", "items": "物品", "events": "剧情线"},
    empty_state="（尚无记录）",
    empty_roster="（尚无登记）",
    time="时间",
    place="地点",
    items="物品",
    threads="剧情线",
    affinity="好感 {value}",
    status="状态",
    present="在场",
    elsewhere="在",
    notes="备注",
    said="{speaker}：{text}",
    label="{label}：{value}",
    list_sep="、",
    part_sep="；",
    thread="「{text}」",
    first_seen="{name}（{time}）",
)

EN = ContextTexts(
    language="en",
    card_instructions="# The card author's instructions (highest priority)",
    playing="# You play: {name}",
    personality="## Personality",
    scenario="## Scenario",
    examples="## Example dialogue (shows the voice only; none of it happened in the story)",
    user_plays="# The user plays: {user}",
    lore_constant="# World notes",
    card_tail="[The card author's closing instructions] ",
    shortened="… (cut here to fit the budget)",
    summary_opener="[Story so far] A relay summary of the earlier story; all of it is established fact:",
    episode_label="### Turns {first}–{last}",
    anchors="[Anchors, word for word]",
    resident_opener="[Story so far] What earlier stories of {char} with {user} left; all of it is established fact"
    " (none of it happened in this story):",
    prelude_heading="### The story before (this one begins where it ended)",
    memory_opener="[Earlier stories, recalled] What earlier stories left that bears on this turn (established"
    " fact, not events of this story):",
    resident_heading="[Earlier stories] What earlier stories of {char} with {user} left; established fact, not"
    " events of this story:",
    anchor_line="- Turn {turn} {speaker}: {text}",
    digest_headings={
        "前情提要": "Story so far",
        "人物": "Characters",
        "承诺与伏笔": "Promises and foreshadowing",
        "事实账": "Facts",
        "当前场景": "Current scene",
    },
    recall_opener=(
        "[Story memory] Earlier passages that bear on this turn (in story order; for recollection only, "
        "not new events):"
    ),
    recall_summary_line="- Turns {first}–{last} (summary) {text}",
    recall_turn_line="- Turn {turn}{hidden} {parts}",
    recall_hidden=" (hidden)",
    recall_date=" ({date})",
    recall_today=" (this turn: {date})",
    lore_hits="[Lore] Entries that came up this turn:",
    lore_index="[Lore index] Other entries (look them up with lorebook_search when needed):",
    lore_index_plain="[Lore index] Other entries:",
    lore_more="({count} more not listed)",
    world_state="[World state]",
    roster="[Roster] ",
    roster_labels={"characters": "People", "places": "Places", "items": "Items", "events": "Threads"},
    empty_state="(nothing recorded yet)",
    empty_roster="(nobody registered yet)",
    time="Time",
    place="Place",
    items="Items",
    threads="Threads",
    affinity="affinity {value}",
    status="status",
    present="present",
    elsewhere="at",
    notes="notes",
    said="{speaker}: {text}",
    label="{label}: {value}",
    list_sep=", ",
    part_sep="; ",
    thread="“{text}”",
    first_seen="{name} ({time})",
)

CONTEXT_TEXTS: Mapping[Language, ContextTexts] = {"zh": ZH, "en": EN}
