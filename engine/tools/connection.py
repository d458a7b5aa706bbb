"""One live MCP server: started (stdio) or reached (Streamable HTTP) with the official ``mcp``
SDK, its tools listed, calls made with a timeout, ended on close.

The SDK is async; the rest of Inglenook is threads. Each connection runs its own asyncio loop
on a daemon thread, and ``call`` hands it a coroutine and waits with a cancel event, so one
stuck server never blocks another, the scheduler or the GUI thread. A stdio server's stderr
goes through a pipe of which a bounded tail is kept (``stderr_tail``); its last line explains a
failure to the person (masked: the values the server was given in secret read ``***``), never
to an API client, who gets ``McpError.public``: a fixed sentence.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import HTTP, McpError, McpServerConfig, mask_secrets
from .oauth import SIGN_IN_TIMEOUT_S, Opener
from .results import MAX_RESULT_CHARS, ToolResult, tool_result
from .secrets import SecretBox
from .states import CLOSED, FAILED, NEEDS_SIGN_IN, READY, STARTING
from .stderr_tail import StderrTail

log = logging.getLogger(__name__)

# The SDK logs each line a server writes that is not JSON-RPC as an ERROR with a traceback
# (a server printing to stdout writes many): the connection reports what went wrong in one
# line of its own, with the server's stderr, so the SDK's records below CRITICAL are dropped
# unless someone set its level on purpose.
if logging.getLogger("mcp").level == logging.NOTSET:
    logging.getLogger("mcp").setLevel(logging.CRITICAL)

#: How long starting a server and its ``initialize`` may take (``npx`` fetching a package is slow).
CONNECT_TIMEOUT_S = 30.0
STDERR_LINES = 20


@dataclass(frozen=True)
class McpTool:
    server: str
    name: str
    description: str
    input_schema: dict[str, Any]


class McpConnection:
    """``secrets`` (where sign-ins are kept) lets a Streamable HTTP server that asks for OAuth
    be signed in to: with ``opener`` (a browser) the sign-in runs, ``on_url`` is told the
    authorization URL, and the time to start grows by ``SIGN_IN_TIMEOUT_S`` once the browser
    is open (a person is reading); without one such a server ends in ``NEEDS_SIGN_IN``."""

    def __init__(self, config: McpServerConfig, connect_timeout_s: float | None = None,
                 max_result_chars: int = MAX_RESULT_CHARS, secrets: SecretBox | None = None,
                 opener: Opener | None = None, on_url: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.connect_timeout_s = CONNECT_TIMEOUT_S if connect_timeout_s is None else connect_timeout_s
        self.secrets, self.opener, self.on_url = secrets, opener, on_url
        self._sign_in_needed = False
        self._signing_in = False  # the browser is open: a person, not the server, sets the pace
        self.max_result_chars = max_result_chars
        self.state = STARTING
        self.error = ""
        self.tools: list[McpTool] = []
        self._stderr = StderrTail(config.name) if config.transport != HTTP else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._settled = threading.Event()  # ready or failed
        # The last line the server sent that is not JSON-RPC, and how many: a server that
        # answers in something else looks like one that does not answer, so its timeout says so.
        self._invalid = ""
        self._invalid_count = 0
        self._done = threading.Event()  # the loop has ended (the process is gone)
        self._thread = threading.Thread(target=self._run, name=f"mcp-{config.name}", daemon=True)

    # -- life ------------------------------------------------------------------------------

    def start(self) -> McpConnection:
        self._thread.start()
        return self

    def wait_ready(self, timeout: float | None = None) -> McpConnection:
        """Wait until the server is ready; ``McpError`` with its own words when it failed."""
        self._settled.wait(self.connect_timeout_s + 5 if timeout is None else timeout)
        if timeout is None and not self._settled.is_set() and self._signing_in:
            self._settled.wait(SIGN_IN_TIMEOUT_S + 5)
        if self.state != READY:
            raise self.unavailable()
        return self

    def unavailable(self) -> McpError:
        """Why the server cannot be used: the person's words (``problem``, logged) and the API
        client's (``public``: which server and in what state, nothing the server wrote)."""
        detail = self.problem()
        log.info("%s", detail)  # the log file has it; the front end shows the person the same line
        state = _STATE_WORDS.get(self.state, self.state)
        return McpError(detail, public=f"MCP server {self.config.name!r} is not available ({state}); "
                        "the reason is in the Inglenook log on the machine that runs it")

    def problem(self) -> str:
        """One line: why the server is not ready (with its last stderr line when it has one),
        bounded, the server's secret values masked."""
        if self.state == STARTING:
            return f"MCP server {self.config.name!r} is still starting"
        last = self.stderr_lines()[-1:] or [""]
        error = self._masked(self.error)
        tail = f" (it said: {last[0]})" if last[0] and last[0] not in error else ""
        return f"MCP server {self.config.name!r}: {error or self.state}{tail}"

    def stderr_lines(self) -> list[str]:
        """The last lines the server wrote to stderr, each bounded, its secrets masked."""
        if self._stderr is None:
            return []
        return [self._masked(line) for line in self._stderr.lines(STDERR_LINES)]

    def _masked(self, text: str) -> str:
        return mask_secrets(text, self.config.secret_values())

    def close(self, timeout: float = 10.0) -> None:
        """End the session and, for stdio, the server's process (the SDK terminates the
        process tree, then kills it)."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not self._done.is_set():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:
                # The loop closed between the check and the call (asyncio.run closes it just
                # before _run sets _done): the server has already ended; only the join is left.
                log.debug("MCP server %r had already ended when it was closed", self.config.name)
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self.state not in (FAILED, NEEDS_SIGN_IN):
            self.state = CLOSED
        if self._stderr is not None:
            self._stderr.close()

    # -- calls -----------------------------------------------------------------------------

    def call(self, tool: str, arguments: dict[str, Any], timeout_s: float | None = None,
             cancel: threading.Event | None = None) -> ToolResult:
        """Run ``tool``; a server error comes back as an error result, a timeout, a crash or a
        cancel as ``McpError`` (the caller tells the model)."""
        if self.state != READY or self._loop is None:
            raise self.unavailable()
        limit = self.config.timeout_s if timeout_s is None else timeout_s
        seen_before = self._invalid_count
        calling = self._call(tool, arguments)
        try:
            future = asyncio.run_coroutine_threadsafe(calling, self._loop)
        except RuntimeError:  # the loop closed since the state was read: the server has just ended
            calling.close()
            self._done.wait(1.0)
            raise self.unavailable() from None
        deadline = time.monotonic() + limit
        while True:
            if cancel is not None and cancel.is_set():
                future.cancel()
                raise McpError(f"the call to {tool} was stopped")
            left = deadline - time.monotonic()
            if left <= 0:
                future.cancel()
                raise McpError(f"{self.config.name}/{tool} did not answer within {limit:g} s"
                               + self._invalid_note(seen_before))
            if self._done.is_set() and not future.done():
                raise self.unavailable()
            try:
                result = future.result(timeout=min(0.1, left))
            except concurrent.futures.TimeoutError:
                continue
            except concurrent.futures.CancelledError:
                raise McpError(f"the call to {tool} was stopped") from None
            except McpError:
                raise
            except Exception as exc:
                said = self._masked(_one_line(exc))
                log.info("%s/%s failed: %s", self.config.name, tool, said)
                raise McpError(f"{self.config.name}/{tool} failed: {said}") from exc
            return tool_result(result, self.max_result_chars)

    async def _call(self, tool: str, arguments: dict[str, Any]) -> Any:
        return await self._client.call_tool(tool, arguments)

    # -- the loop thread -------------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: BLE001 — anything the SDK raises ends this server only
            self._fail(_one_line(exc))
        finally:
            if self.state == READY:
                self.state = FAILED if self._stop is None or not self._stop.is_set() else CLOSED
                if self.state == FAILED and not self.error:
                    self.error = "the server ended the connection"
            self._done.set()
            self._settled.set()

    async def _main(self) -> None:
        import anyio  # noqa: PLC0415 — with the SDK, only when a server starts

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        ready = anyio.Event()

        async def watchdog(scope: anyio.CancelScope) -> None:
            with anyio.move_on_after(self.connect_timeout_s):
                await ready.wait()
                return
            if self._signing_in:  # the sign-in's listener gives up on its own after its time
                with anyio.move_on_after(SIGN_IN_TIMEOUT_S):
                    await ready.wait()
                    return
            note = self._invalid_note(0).removeprefix("; ")
            self._fail(f"did not finish starting within {self.connect_timeout_s:g} s"
                       + (f": {note}" if note else " (no answer to initialize)"))
            scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(watchdog, group.cancel_scope)
            try:
                await self._session(ready)
            except Exception as exc:  # noqa: BLE001
                if self.state != FAILED:
                    self._fail(_one_line(exc))
            group.cancel_scope.cancel()

    async def _session(self, ready: Any) -> None:
        from contextlib import AsyncExitStack  # noqa: PLC0415

        from mcp import Client  # noqa: PLC0415
        from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: PLC0415

        async with AsyncExitStack() as stack:
            if self.config.transport == HTTP:
                from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415
                from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: PLC0415

                http = await stack.enter_async_context(
                    create_mcp_http_client(headers=self.config.headers or None, auth=self._oauth()))
                transport: Any = streamable_http_client(self.config.url, http_client=http)
            else:
                params = StdioServerParameters(command=self.config.command, args=list(self.config.args),
                                               env=self.config.env or None, cwd=self.config.cwd or None)
                assert self._stderr is not None
                transport = stdio_client(params, errlog=self._stderr.writer)
            client = Client(transport, message_handler=self._on_message)
            self._client = await stack.enter_async_context(client)
            listed = await self._list_tools()
            self.tools = listed
            if self.state != STARTING:  # failed meanwhile (its start timed out): stays so
                return
            self.state = READY
            self._settled.set()
            ready.set()
            log.info("MCP server %r ready with %d tools", self.config.name, len(listed))
            assert self._stop is not None
            await self._stop.wait()

    async def _on_message(self, message: Any) -> None:
        """The SDK hands over what the server sent that is not a request or a notification it
        handles itself; an exception is a line that is not JSON-RPC."""
        if isinstance(message, Exception):
            self._invalid_count += 1
            errors = getattr(message, "errors", None)  # pydantic's: the line itself is its input
            found = errors()[0].get("input") if callable(errors) and errors() else None
            line = found if isinstance(found, str) else _one_line(message)
            self._invalid = repr(self._masked(" ".join(line.split()))[:120])

    def _invalid_note(self, seen_before: int) -> str:
        """Why there was no answer, when the server sent lines that are not MCP meanwhile."""
        if self._invalid_count <= seen_before:
            return ""
        return f"; it answered with something that is not MCP (JSON-RPC): {self._invalid}"

    def _oauth(self) -> Any:
        """The SDK's OAuth provider, unless sign-ins have nowhere to be kept or the person gave
        an Authorization header of their own (a bearer token)."""
        if self.secrets is None or any(k.lower() == "authorization" for k in self.config.headers):
            return None
        from .oauth import oauth_provider  # noqa: PLC0415 — with the SDK, only when a server starts

        def needed() -> None:
            self._sign_in_needed = True

        def shown(url: str) -> None:
            self._signing_in = True
            if self.on_url is not None:
                self.on_url(url)

        return oauth_provider(self.secrets, self.config.name, self.config.url, self.opener, shown, needed)

    async def _list_tools(self) -> list[McpTool]:
        tools: list[McpTool] = []
        cursor: str | None = None
        for _ in range(100):  # a paginator that never ends cannot hang the start
            page = await self._client.list_tools(cursor=cursor)
            tools += [McpTool(self.config.name, t.name, t.description or "", dict(t.input_schema or {}))
                      for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _fail(self, message: str) -> None:
        if self.state in (READY, STARTING):
            self.state = NEEDS_SIGN_IN if self._sign_in_needed else FAILED
            self.error = (f"needs sign-in (Settings → Tools, or: inglenook mcp login {self.config.name})"
                          if self._sign_in_needed else message)
            log.info("MCP server %r failed: %s", self.config.name, self._masked(message))  # the caller shows it
        self._settled.set()


_STATE_WORDS = {STARTING: "it is still starting", FAILED: "it failed to start or stopped",
                NEEDS_SIGN_IN: "it needs a sign-in", CLOSED: "it was stopped"}


def _one_line(exc: BaseException) -> str:
    """An exception in one line; an exception group by its first leaf (anyio wraps them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        return f"cannot start it: {text}"
    return text[:300]
