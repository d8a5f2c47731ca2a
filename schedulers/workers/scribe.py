"""The scribe (场记): after every finished reply, the side model reads the scene as it stood before
the turn plus the turn itself, and answers with a JSON patch. The patch is recorded on that reply —
never on whatever the leaf is by the time the answer comes back — with character names matched to
known spellings and the merge rules' refusals kept as warnings.

Path order: a reply's job waits until the previous reply on its path has its patch or its final
outcome, so every patch is computed from a complete snapshot.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from domain.application import Changji
from domain.language import Language
from domain.ports import ChatModel, ModelCallError
from domain.texts import CONTEXT_TEXTS
from domain.tree.commands.jobs import SideCall
from domain.tree.rules.scene import Roster, SceneSnapshot, apply_patch, canonical_patch, parse_scribe_output
from domain.values import JobKind
from projections.read_models.store import ReadModels
from schedulers.outcomes import Done, Failed, Outcome, Skipped, Waiting
from service.executor import Executor

MAX_TOKENS = 2048
UNSETTLED = ("pending", "retrying")

PROMPTS: dict[Language, dict[str, str]] = {
    "zh": {
        "system": """你是这场角色扮演的场记，负责记账。阅读【当前账本】和【本轮对话】，只输出一个 JSON 对象：{{"patch": {{…}}}}。

patch 里只写本轮发生了变化的字段，可用的字段只有这些：
- time：故事内的时间，字符串，整体替换。剧情里时间跳过时必须更新。
- location：当前场景所在的地点，字符串，整体替换。
- characters：按人物名合并，形如 {{"名字": {{"affinity": 数字, "status": "…", "notes": "…", "at": "…"}}}}，只写变化了的子字段。
  affinity 是此人对{user}的态度（−100 到 100），在当前值上小步调整，通常每轮 ±1 到 10；
  status 是此刻的状态；notes 记承诺、知道的秘密等；at 是此人现在所在的地点，叫法与 location 一致，人物离场时写明去了哪里；
  人物彻底退出故事时写 "名字": null。
- inventory：{user}拥有或经手的物品，有变化时给出完整数组（整体替换），每项一句话并注明持有人，例如"黄铜怀表（{user}持有）"。
- flags：其他要记住的键值（誓言、秘密、天气……），值是字符串；写 null 删除该键。
- plot_threads：尚未了结的剧情线和伏笔，有变化时给出完整数组（整体替换），每项一句话。

人名：沿用账本里已有的写法。已知的名字：{known}。只为真正新登场的人物建新条目，不要把卡名或剧本名当成人物。
记账规则：负面的事也要记（被拒绝的礼物仍归原主，收回的承诺写进 flags）；新的承诺与伏笔写进 plot_threads；没有变化的字段不要写；本轮什么都没变就输出 {{"patch": {{}}}}。

只输出这个 JSON 对象，不要任何解释。""",
        "ledger": "【当前账本】",
        "turn": "【本轮对话】",
    },
    "en": {
        "system": """You are the scribe of this role-play: you keep the ledger. Read [LEDGER] and [THIS TURN] and output one JSON object only: {{"patch": {{…}}}}.

Put in the patch only the fields that changed in this turn. These are the only fields:
- time: in-story time, a string that replaces the old one. Update it whenever the story skips time.
- location: where the scene is now, a string that replaces the old one.
- characters: merged per name, {{"Name": {{"affinity": number, "status": "…", "notes": "…", "at": "…"}}}}, with only the sub-fields that changed.
  affinity is this person's attitude to {user} (−100 to 100), moved in small steps from its current value, usually ±1 to 10;
  status is how they are now; notes keep promises, secrets they know and the like; at is where they are now, named like location (when someone leaves, write where they went);
  write "Name": null when someone leaves the story for good.
- inventory: the things {user} has or handles; when it changes give the whole array (it replaces the old one), one sentence per entry naming the holder, e.g. "a brass pocket watch (held by {user})".
- flags: other things to remember as key → string (vows, secrets, weather …); null deletes a key.
- plot_threads: open threads and foreshadowing; when they change give the whole array (it replaces the old one), one sentence each.

Names: keep the spellings already in the ledger. Known names: {known}. Create an entry only for someone genuinely new; never take the card's or the script's title for a character.
Rules: record setbacks too (a refused gift stays with its owner; a withdrawn promise goes into flags); new promises and foreshadowing go into plot_threads; leave out what did not change; if nothing changed, output {{"patch": {{}}}}.

Output only that JSON object, with no explanation.""",
        "ledger": "[LEDGER]",
        "turn": "[THIS TURN]",
    },
}


def scribe_messages(
    snapshot: SceneSnapshot,
    known: Sequence[str],
    card_name: str,
    user_name: str,
    user_text: str,
    reply_text: str,
    language: Language = "zh",
) -> list[dict[str, str]]:
    """The scribe's request: its instructions, then the ledger before this turn and the turn itself."""
    prompt = PROMPTS[language]
    texts = CONTEXT_TEXTS[language]
    names = texts.list_sep.join(dict.fromkeys(n for n in known if n.strip())) or "-"
    ledger = json.dumps(snapshot.to_dict(), ensure_ascii=False, indent=1)
    turn = f"{texts.speech(user_name, user_text)}\n\n{texts.speech(card_name, reply_text)}"
    return [
        {"role": "system", "content": prompt["system"].format(user=user_name, known=names)},
        {"role": "user", "content": f"{prompt['ledger']}\n{ledger}\n\n{prompt['turn']}\n{turn}"},
    ]


class ScribeWorker:
    kind: JobKind = "scribe"

    def __init__(self, app: Changji, store: ReadModels, executor: Executor, model: ChatModel | None) -> None:
        self.app, self.store, self.executor = app, store, executor
        self.model = model

    @property
    def skip_reason(self) -> str | None:
        return "no side model" if self.model is None else None

    async def run(self, job: Mapping[str, Any]) -> Outcome:
        node_id = UUID(job["node_id"])
        if self.model is None:
            return Skipped("no side model")
        brief = await self.executor.load(self.app.scenes.scribe_brief, node_id)
        if brief is None:
            return Skipped("not a finished reply")
        if not brief.reply.text.strip():
            return Skipped("the reply has no text")
        before = await self.executor.query(self.store.predecessor_job, node_id, self.kind)
        if before is not None and before[1] in UNSETTLED:
            return Waiting(f"{self.kind}:{before[0]}")
        scene = await self.executor.query(self.store.scene, brief.user.id)
        snapshot, roster = (scene.snapshot, scene.roster) if scene else (SceneSnapshot(), Roster())
        known = [brief.card_name, brief.user_name, *snapshot.characters, *roster.characters]
        messages = scribe_messages(
            snapshot, known, brief.card_name, brief.user_name, brief.user.text, brief.reply.text, brief.language
        )
        started = time.perf_counter()
        try:
            result = await self.model.chat(messages, max_tokens=MAX_TOKENS)
        except ModelCallError as failure:
            elapsed = (time.perf_counter() - started) * 1000
            return Failed(
                f"{failure.outcome}: {failure}", SideCall("scribe", self.model.model, 0, 0, elapsed, failure.outcome)
            )
        elapsed = (time.perf_counter() - started) * 1000
        call = SideCall(
            "scribe", result.model or self.model.model, result.prompt_tokens or 0, result.completion_tokens or 0,
            elapsed, "ok",
        )  # fmt: skip
        parsed = parse_scribe_output(result.text)
        if parsed is None:
            text = result.text if len(result.text) <= 400 else "…" + result.text[-160:]
            return Failed(f"unreadable scribe answer (no JSON object): {text}", call)
        if not parsed["patch"]:
            return Skipped("nothing changed in this turn", call)
        patch = canonical_patch(parsed["patch"], known)
        merged = apply_patch(snapshot, roster, patch, known)
        await self.executor.write(self.app.scenes.record_scribe_patch, node_id, patch, merged.warnings, call)
        return Done()
