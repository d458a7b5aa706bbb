"""``inglenook mcp``: MCP tool servers: add (stdio or Streamable HTTP), import an
``mcpServers`` JSON, list, remove, test (start it and list its tools), login/logout (OAuth for a
Streamable HTTP server that asks for it: the URL printed and opened in the browser, the tokens
kept in the keyring), and allow-api (whether API clients may have it run: a Responses request's
``{"type": "mcp", "server_label": NAME}``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from inglenook.cli.terminal import print_table
from inglenook.engine import Paths


def add_commands(commands: Any) -> None:
    mcp = commands.add_parser(
        "mcp",
        help="MCP tool servers: add, import, list, remove, test, login, logout, allow-api",
        description="Tool servers (Model Context Protocol) that chats may call. Environment and header "
        "values are kept in the system keyring, never in the database. API clients may name a server "
        "(Responses API: tools=[{\"type\": \"mcp\", \"server_label\": NAME}]) only once it is allowed "
        "for them: inglenook mcp allow-api NAME on.",
    )
    actions = mcp.add_subparsers(dest="mcp_action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add a server: NAME -- COMMAND [ARGS...] or NAME --url URL",
                             description="inglenook mcp add time -- uvx mcp-server-time\n"
                             "inglenook mcp add docs --url https://example.com/mcp --header 'Authorization=Bearer …'",
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    add.add_argument("name", metavar="NAME")
    add.add_argument("command", metavar="COMMAND", nargs="*", help="after --: the command that starts it")
    add.add_argument("--url", help="a Streamable HTTP server's URL")
    add.add_argument("--header", action="append", default=[], metavar="K=V", help="an HTTP header (repeatable)")
    add.add_argument("--env", action="append", default=[], metavar="K=V", help="an environment variable (repeatable)")
    add.add_argument("--cwd", default="", help="the folder a stdio server starts in")
    add.add_argument("--timeout", type=float, metavar="SECONDS", help="how long a call may take (default 60)")
    add.add_argument("--allow-api", action="store_true",
                     help="let API clients have it run (off by default; see: inglenook mcp allow-api)")
    imported = actions.add_parser("import", help="add the servers of an mcpServers JSON file (- reads stdin); "
                                  "without FILE, list other apps' files (Claude Desktop, Cursor, LM Studio)")
    imported.add_argument("file", metavar="FILE", nargs="?")
    actions.add_parser("list", help="show the servers")
    remove = actions.add_parser("remove", help="remove a server and its secrets")
    remove.add_argument("name", metavar="NAME")
    test = actions.add_parser("test", help="start a server and list its tools (signing in if it asks for OAuth)")
    test.add_argument("name", metavar="NAME")
    login = actions.add_parser("login", help="sign in to a Streamable HTTP server that asks for OAuth "
                               "(opens the browser; the tokens go to the keyring)")
    login.add_argument("name", metavar="NAME")
    logout = actions.add_parser("logout", help="forget a server's OAuth tokens")
    logout.add_argument("name", metavar="NAME")
    allow = actions.add_parser(
        "allow-api", help="whether API clients may have a server run: allow-api NAME on|off",
        description="With on, a Responses API request may name the server "
        '(tools=[{"type": "mcp", "server_label": NAME}]) and Inglenook runs its tools. A call runs '
        "without asking when you allowed that tool always in a chat, or the request says "
        'require_approval "never"; otherwise the client gets an mcp_approval_request to answer.')
    allow.add_argument("name", metavar="NAME")
    allow.add_argument("switch", choices=("on", "off"))
    mcp.set_defaults(handler=cmd_mcp, parser=add)


def command_after_options(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """``mcp add NAME --timeout 15 -- CMD ARGS``: argparse ends the positional COMMAND (empty)
    at the first option, so what follows ``--`` comes back unparsed; it is the command. The
    words argparse did not take otherwise are returned."""
    if extra[:1] == ["--"] and not args.command:
        args.command = extra[1:]
        return []
    return extra


def cmd_mcp(args: argparse.Namespace, paths: Paths) -> int:
    from inglenook.engine import McpServers, Store  # noqa: PLC0415 — keeps --help fast

    store = Store(paths.database)
    try:
        servers = McpServers(store)
        if args.mcp_action == "add":
            return _add(args, servers)
        if args.mcp_action == "import":
            return _import(args.file, servers)
        if args.mcp_action == "list":
            return _list(servers)
        if args.mcp_action == "allow-api":
            servers.update(args.name, allow_api=args.switch == "on")
            words = "may now be run by API clients" if args.switch == "on" else "is no longer run for API clients"
            print(f"The MCP server {args.name} {words}.")
            return 0
        if args.mcp_action == "remove":
            servers.remove(args.name)
            print(f"Removed the MCP server {args.name}.")
            return 0
        if args.mcp_action == "logout":
            from inglenook.engine import McpManager  # noqa: PLC0415

            had = McpManager(store).sign_out(args.name)
            print(f"Signed out of {args.name}." if had else f"There was no sign-in kept for {args.name}.")
            return 0
        return _test(args.name, servers, store, login=args.mcp_action == "login")
    finally:
        store.close()


def _add(args: argparse.Namespace, servers: Any) -> int:
    from inglenook.engine import McpServerConfig, parse_pairs  # noqa: PLC0415

    if bool(args.url) == bool(args.command):
        args.parser.error("give either -- COMMAND [ARGS...] (stdio) or --url URL (Streamable HTTP)")
    extra: dict[str, Any] = {} if args.timeout is None else {"timeout_s": args.timeout}
    extra["allow_api"] = args.allow_api
    if args.url:
        if args.env or args.cwd:
            args.parser.error("--env and --cwd are for stdio servers")
        config = McpServerConfig(args.name, "http", url=args.url, headers=parse_pairs(args.header, "header"), **extra)
    else:
        if args.header:
            args.parser.error("--header is for --url servers")
        config = McpServerConfig(args.name, "stdio", command=args.command[0], args=tuple(args.command[1:]),
                                 env=parse_pairs(args.env, "env"), cwd=args.cwd, **extra)
    servers.add(config)
    print(f"Added the MCP server {config.name} ({config.target}). Try it: inglenook mcp test {config.name}")
    return 0


def _import(file: str | None, servers: Any) -> int:
    from inglenook.engine import McpError, other_app_configs, read_mcp_file  # noqa: PLC0415

    if file is None:  # show what other apps have; nothing is added without the person's say
        found = other_app_configs()
        if not found:
            print("No Claude Desktop, Cursor or LM Studio MCP settings found. Give a file: inglenook mcp import FILE")
        for app, path in found:
            try:
                names = ", ".join(c.name for c in read_mcp_file(path))
            except McpError as exc:
                names = f"unreadable: {exc}"
            print(f"{app}: {path} ({names})\n  inglenook mcp import {path}")
        return 0
    added, skipped = servers.import_json(read_mcp_file(file))
    for name in added:
        print(f"Added {name}")
    for name in skipped:
        print(f"Skipped {name}: there is already a server with that name")
    return 0


def _list(servers: Any) -> int:
    found = servers.all()
    if not found:
        print("No MCP servers. `inglenook mcp add NAME -- COMMAND` or `inglenook mcp import FILE` adds them.")
        return 0
    rows = [["NAME", "TRANSPORT", "ON", "API", "TARGET", "SECRETS"]]
    for config in found:
        kept = [*sorted(config.env), *sorted(config.headers), *(["URL credentials"] if config.url_secret else [])]
        secrets = ", ".join(kept) or "-"
        rows.append([config.name, config.transport, "yes" if config.enabled else "no",
                     "yes" if config.allow_api else "no", config.target, secrets])
    print_table(rows)
    return 0


def _test(name: str, servers: Any, store: Any, login: bool = False) -> int:
    """Start ``name`` and list its tools; a server that asks for OAuth is signed in to here
    (``login`` says so and lists the tools after)."""
    import webbrowser  # noqa: PLC0415

    from inglenook.engine import McpError, McpManager  # noqa: PLC0415

    def show(url: str) -> None:
        print(f"Sign in to {name} in your browser; if it did not open, open this URL:\n  {url}", flush=True)

    config = servers.get(name)
    if login and config.transport != "http":
        print(f"inglenook: error: {name} is a stdio server; only Streamable HTTP servers sign in", file=sys.stderr)
        return 1
    try:
        connection = McpManager(store).test(config, opener=webbrowser.open, on_url=show)
    except McpError as exc:
        print(f"inglenook: error: {exc}", file=sys.stderr)
        return 1
    try:
        if login:
            print(f"Signed in to {name}. Its tools: {', '.join(t.name for t in connection.tools) or 'none'}")
        else:
            for tool in connection.tools:
                print(tool.name)
    finally:
        connection.close()
    return 0
