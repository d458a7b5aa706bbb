"""A chat turn with tools: the model may call the chat's MCP tools, round after round.

Each round is an ordinary job on the scheduler (batched with everything else, its prompt's
prefix restored from the cache): the tools go to the model through its own template's tool
format (``text.tool_calls``, as for the API), a call in the answer is taken out of the text,
put to the person (``Approver``: approve, deny, or run with edited arguments; "in this chat"
and "always" are remembered), run on its server, and its result goes back as a tool message
for the next round. Calls approved together run concurrently. A denied call goes back as a
refusal, a failed one as an error the model reads. The last of several rounds offers the same
tools (a stable prompt prefix) but must answer in words. ``cancel`` stops the model or the calls.

The rounds are a generator (``steps``) that stops at each call put to the person, so a turn
can wait for its approval without holding a thread: ``advance`` runs it (on a worker thread)
to the next question or to its end, and ``advance(decision)`` resumes it later, on any thread.
``run`` is the blocking way, asking ``approver`` in place (the API, the CLI, tests).

Everything is saved as it happens: the assistant message that called (its visible text), one
``tool`` message per result, and a row per call in ``mcp_tool_calls``.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from ..base import (
    ChatMessage, FunctionCall, GenerateJob, InvalidRequest, ModelRecord, NamedFunction, NamedToolChoice,
    ResponseToolCall, Tool, ToolCall,
)
from ..runtime import header_of
from ..store import Conversation, Message, Store, table_named
from ..text import TemplateAbilities, ToolCallFilter, ToolPlan, engine_messages, plan_tools
from ..tools import (
    ALWAYS, ANSWER_ONLY_GRAMMAR, DEFAULT_MAX_ROUNDS, IN_CHAT, Approver, CallRequest, Decision, McpError, McpTool, Permissions, ToolResult,
    error_result,
)
from .context import ChatContext
from .turn import Turn

log = logging.getLogger(__name__)

RAN, DENIED, FAILED, NOT_RUN = "ran", "denied", "failed", "not run"


@dataclass(frozen=True)
class RoundStats:
    """One model round: its prompt, how much of it came from the cache, the calls it made."""

    round: int
    prompt_tokens: int
    cached_tokens: int
    ttft_s: float
    calls: int

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass(frozen=True)
class CallRecord:
    """A call as saved and shown: what ran (the edited arguments, when edited) and its result."""

    call_id: str
    server: str
    tool: str
    arguments: dict[str, Any]
    status: str  # ran | denied | failed | not run
    result: ToolResult
    duration_s: float
    message_id: int = 0  # the assistant message that asked
    result_message_id: int = 0


# What a front end hears (on the turn's thread): a piece of the model's text, a call put to
# the person, a call's outcome, a round's end.
@dataclass(frozen=True)
class TextPiece:
    text: str


@dataclass(frozen=True)
class CallProposed:
    request: CallRequest


@dataclass(frozen=True)
class CallFinished:
    record: CallRecord


@dataclass(frozen=True)
class RoundFinished:
    stats: RoundStats
    message: Message | None


ToolTurnEvent = TextPiece | CallProposed | CallFinished | RoundFinished


@dataclass
class ToolTurn:
    service: ChatContext
    conversation: Conversation
    approver: Approver
    tool_choice: str | None = None  # first round: "auto", "required", "none" or a tool's name
    max_rounds: int = DEFAULT_MAX_ROUNDS
    use_cache: bool = True
    on_event: Callable[[ToolTurnEvent], None] | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    rounds: list[RoundStats] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    message: Message | None = None  # the last answer
    tool_seconds: float = 0.0  # time in tools, shown apart from the model's
    then_choice: str = "auto"  # the rounds after the first (but the last, which answers in words)
    waiting: CallRequest | None = None  # the call put to the person that ``advance`` returned
    done: bool = False
    _cancel: threading.Event = field(default_factory=threading.Event)
    _turn: Turn | None = None
    _steps: Generator[CallRequest, Decision, Message | None] | None = None

    def cancel(self) -> None:
        self._cancel.set()
        if self._turn is not None:
            self._turn.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def wait(self) -> Message | None:
        """Run to the end (what a stopped answer's lane does): ``run``."""
        return self.run()

    def run(self) -> Message | None:
        """Run every round (blocking: a worker thread's job), asking ``approver`` in place;
        the final answer, saved."""
        request = self.advance()
        while request is not None:
            request = self.advance(self.approver(request))
        return self.message

    def advance(self, decision: Decision | None = None) -> CallRequest | None:
        """Run to the next call put to the person (returned, and kept as ``waiting``) or to the
        end (None; ``message`` is the answer). Blocking while the model writes or tools run,
        never while the person decides: resume with that call's ``decision``. One caller at a time."""
        if self._steps is None:
            self._steps = self.steps()
            resume: Callable[[], CallRequest] = functools.partial(next, self._steps)
        elif self.waiting is None or decision is None:
            raise RuntimeError("this tool turn is not waiting for a decision")
        else:
            resume = functools.partial(self._steps.send, decision)
        self.waiting = None
        try:
            self.waiting = resume()
        except StopIteration:
            self.done = True
        return self.waiting

    def steps(self) -> Generator[CallRequest, Decision, Message | None]:
        """Every round, yielding each call the person must decide and taking the decision back."""
        service, conversation = self.service, self.conversation
        tools = service.tools
        toolset = tools.tools_for(tools.servers.chat_servers(conversation.id))
        for problem in toolset.problems:
            log.warning("%s", problem)
        offered = [Tool.model_validate(d) for d in toolset.definitions()]
        model_id = conversation.model_id or service.default_model_id()
        abilities = self._abilities(model_id)
        first_choice = self.tool_choice or "auto"
        if first_choice not in ("auto", "required", "none") and first_choice not in toolset.tools:
            # A tool chosen in the chat's settings whose server is off now, or that was switched off.
            log.warning("the chosen tool %r is not offered in this chat; the model decides", first_choice)
            first_choice = "auto"
        for index in range(self.max_rounds):
            if self.cancelled:
                break
            final = index > 0 and index == self.max_rounds - 1
            choice = first_choice if index == 0 else self.then_choice
            plan = plan_tools(offered, _choice(choice), abilities)
            # The answer streams through a filter that holds back what may be a call, so the
            # person sees the model's words and the call's own block, never its raw text.
            calls_filter = ToolCallFilter(plan, parallel=True) if plan is not None and not final else None
            turn = self._round(model_id, abilities, plan, final, calls_filter)
            calls: list[ResponseToolCall] = []
            visible = turn.text
            if calls_filter is not None:
                calls, rest = calls_filter.finish()
                if rest:
                    self._emit(TextPiece(rest))
                visible = turn.text if not calls else _without_calls(turn.text, plan)
            message = turn.message
            if message is not None and calls and visible != message.content:
                message = service.store.update_message(message.id, content=visible.strip())
            records = (yield from self._calls(calls, toolset.tools, message)) if calls and message else []
            finished = turn.finished
            stats = RoundStats(index + 1, finished.usage.prompt_tokens if finished else 0,
                               finished.usage.cached_tokens if finished else 0,
                               finished.timings.ttft_s if finished else 0.0, len(records))
            self.rounds.append(stats)
            self.message = message
            self._emit(RoundFinished(stats, message))
            if not records or turn.error is not None or self.cancelled:
                break
        return self.message

    # -- one round of the model ------------------------------------------------------------

    def _round(self, model_id: str, abilities: TemplateAbilities, plan: ToolPlan | None, answer_only: bool,
               calls_filter: ToolCallFilter | None) -> Turn:
        service = self.service
        settings = {**self.conversation.sampling, **self.overrides}
        sampling = service.sampling_for(settings)
        grammar = ANSWER_ONLY_GRAMMAR if answer_only and plan is not None else plan.grammar() if plan else None
        if grammar is not None:
            sampling = sampling.with_overrides(grammar=grammar)
        history = chat_messages(service.store, self.conversation)
        messages = engine_messages(history, abilities, plan)
        job = GenerateJob(model_id=model_id, sampling=sampling, messages=messages,
                          tools=list(plan.tools) if plan is not None and plan.native else None,
                          use_cache=self.use_cache, conversation_id=self.conversation.id, client=service.client,
                          lora=service.lora_for(settings))
        reply_to = service.store.leaf(self.conversation.id)
        turn = Turn(service.store, self.conversation, service.scheduler.submit(job), model_id, reply_to)
        self._turn = turn
        if self.cancelled:
            turn.cancel()
        for chunk in turn:
            shown = calls_filter.feed(chunk.text) if calls_filter is not None else chunk.text
            if shown:
                self._emit(TextPiece(shown))
        return turn

    def _abilities(self, model_id: str) -> TemplateAbilities:
        resolve = self.service.resolve
        if resolve is None:
            return TemplateAbilities()
        record: ModelRecord = resolve(model_id)
        return TemplateAbilities.of(header_of(record).chat_template)

    # -- calls -----------------------------------------------------------------------------

    def _calls(self, calls: list[ResponseToolCall], offered: dict[str, McpTool],
               message: Message) -> Generator[CallRequest, Decision, list[CallRecord]]:
        """Put each call to the person (yielded; the decision is sent back), run the approved
        ones together, save every outcome."""
        permissions = Permissions(self.service.store)
        decided: list[tuple[ResponseToolCall, McpTool | None, Decision | None]] = []
        for call in calls:
            tool = offered.get(call.function.name)
            if tool is None or self.cancelled:
                decided.append((call, tool, None))
                continue
            request = CallRequest(call.id, tool.server, tool.name, _arguments(call.function.arguments),
                                  tool.description, self.conversation.id)
            self._emit(CallProposed(request))
            if permissions.allowed(tool.server, tool.name, self.conversation.id):
                decision = Decision()
            else:
                decision = yield request
                if decision.approved and decision.remember in (IN_CHAT, ALWAYS):
                    permissions.remember(tool.server, tool.name, self.conversation.id, decision.remember)
            decided.append((call, tool, decision))
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(decided))) as pool:
            futures = [pool.submit(self._outcome, call, tool, decision) for call, tool, decision in decided]
            outcomes = [f.result() for f in futures]
        records = [self._save(record, message) for record in outcomes]
        for record in records:
            self._emit(CallFinished(record))
        return records

    def _outcome(self, call: ResponseToolCall, tool: McpTool | None, decision: Decision | None) -> CallRecord:
        arguments = _arguments(call.function.arguments)
        if tool is None:
            return CallRecord(call.id, "", call.function.name, arguments, FAILED,
                              error_result(f"there is no tool named {call.function.name}"), 0.0)
        if decision is None:
            why = "the call was stopped" if self.cancelled else "the limit of rounds in one turn was reached"
            return CallRecord(call.id, tool.server, tool.name, arguments, NOT_RUN, error_result(why), 0.0)
        if not decision.approved:
            words = "The user declined this call" + (f": {decision.reason}" if decision.reason else ".")
            return CallRecord(call.id, tool.server, tool.name, arguments, DENIED, ToolResult(words), 0.0)
        if decision.arguments is not None:
            arguments = decision.arguments
        started = time.monotonic()
        try:
            connection = self.service.tools.connection(tool.server)
            result = connection.call(tool.name, arguments, cancel=self._cancel)
            status = FAILED if result.is_error else RAN
        except McpError as exc:
            result, status = error_result(str(exc)), FAILED
        return CallRecord(call.id, tool.server, tool.name, arguments, status, result, time.monotonic() - started)

    def _save(self, record: CallRecord, message: Message) -> CallRecord:
        store = self.service.store
        answer = store.add_message(self.conversation.id, "tool", record.result.text)
        row = {"conversation_id": self.conversation.id, "message_id": message.id, "result_message_id": answer.id,
               "call_id": record.call_id, "server": record.server, "tool": record.tool,
               "arguments": json.dumps(record.arguments, ensure_ascii=False), "status": record.status,
               "result": json.dumps(record.result.to_json(), ensure_ascii=False), "duration_s": record.duration_s,
               "created_at": time.time()}
        with store.writing():
            table_named(store.db, "mcp_tool_calls").insert(row)
        self.tool_seconds += record.duration_s
        saved = CallRecord(record.call_id, record.server, record.tool, record.arguments, record.status,
                           record.result, record.duration_s, message.id, answer.id)
        self.calls.append(saved)
        return saved

    def _emit(self, event: ToolTurnEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)


def _without_calls(text: str, plan: ToolPlan | None) -> str:
    """The words of an answer that called, without the calls (what is saved and shown)."""
    if plan is None:
        return text
    return ToolCallFilter(plan, parallel=True).finish_text(text)[1]


def _choice(choice: str) -> str | NamedToolChoice:
    if choice in ("auto", "required", "none"):
        return choice
    return NamedToolChoice(function=NamedFunction(name=choice))


def _arguments(text: str) -> dict[str, Any]:
    try:
        found = json.loads(text) if text else {}
    except ValueError:
        return {"_unparsed": text}
    return found if isinstance(found, dict) else {"value": found}


def saved_calls(store: Store, conversation_id: int) -> list[CallRecord]:
    """Every call of a conversation, in order (for the window and exports)."""
    with store.reading():
        rows = list(store.db["mcp_tool_calls"].rows_where("conversation_id = ?", [conversation_id], order_by="id"))
    records = []
    for row in rows:
        result = json.loads(row["result"] or "{}")
        records.append(CallRecord(
            row["call_id"], row["server"], row["tool"], json.loads(row["arguments"] or "{}"), row["status"],
            ToolResult(result.get("text", ""), bool(result.get("is_error")),
                       tuple(tuple(i) for i in result.get("images", [])),
                       tuple(tuple(link) for link in result.get("links", [])),
                       int(result.get("cut_from", 0))),
            float(row["duration_s"] or 0), row["message_id"], row["result_message_id"]))
    return records


def chat_messages(store: Store, conversation: Conversation) -> list[ChatMessage]:
    """The conversation as OpenAI-shaped messages: an answer that called carries its calls,
    each result is a ``tool`` message (the template renders them its own way)."""
    calls: dict[int, list[CallRecord]] = {}
    by_result: dict[int, CallRecord] = {}
    for record in saved_calls(store, conversation.id):
        calls.setdefault(record.message_id, []).append(record)
        by_result[record.result_message_id] = record
    out: list[ChatMessage] = []
    if conversation.system_prompt:
        out.append(ChatMessage(role="system", content=conversation.system_prompt))
    for message in store.messages(conversation.id):
        if message.status == "error":
            continue
        if message.role == "tool":
            answered = by_result.get(message.id)
            out.append(ChatMessage(role="tool", content=message.content, name=answered.tool if answered else None,
                                   tool_call_id=answered.call_id if answered else None))
        elif message.role == "assistant" and message.id in calls:
            tool_calls = [ToolCall(id=r.call_id, function=FunctionCall(name=r.tool, arguments=json.dumps(r.arguments)))
                          for r in calls[message.id]]
            out.append(ChatMessage(role="assistant", content=message.content, tool_calls=tool_calls))
        elif message.role in ("user", "assistant", "system"):
            out.append(ChatMessage(role=message.role, content=message.content))  # type: ignore[arg-type]
    if not out or out[-1].role == "assistant" and not out[-1].tool_calls:
        raise InvalidRequest("there is no message to answer")
    return out
