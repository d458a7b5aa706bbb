"""Schema migrations: named functions, applied in order, recorded in ``_migrations``.

Append new migrations to ``MIGRATIONS``; never edit or reorder one that has shipped,
because databases in the wild have already recorded it as applied.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlite_utils

from .sqlite_tables import table_named


def m001_initial(db: sqlite_utils.Database) -> None:
    table_named(db, "conversations").create(
        {
            "id": int,
            "title": str,
            "model_id": str,
            "system_prompt": str,
            "sampling": str,  # JSON object of SamplingParams overrides
            "created_at": float,
            "updated_at": float,
        },
        pk="id",
    )
    table_named(db, "messages").create(
        {
            "id": int,
            "conversation_id": int,
            "role": str,
            "content": str,
            # complete | partial (stopped by the user) | error (generation failed)
            "status": str,
            "finish_reason": str,
            "model_id": str,
            "prompt_tokens": int,
            "cached_tokens": int,
            "completion_tokens": int,
            "ttft_ms": float,
            "tokens_per_s": float,
            "created_at": float,
        },
        pk="id",
        foreign_keys=[("conversation_id", "conversations", "id")],
        not_null={"conversation_id", "role", "content", "status"},
        defaults={"status": "complete"},
    )
    table_named(db, "messages").create_index(["conversation_id", "id"])
    table_named(db, "models").create(
        {
            "id": str,
            "path": str,
            "name": str,
            "architecture": str,
            "quantization": str,
            "parameter_count": int,
            "context_length": int,
            "size_bytes": int,
            "mtime": float,
            "fingerprint": str,
            "source": str,  # starter | scan | import | download
            "metadata": str,  # JSON: selected GGUF keys
            "added_at": float,
        },
        pk="id",
    )
    table_named(db, "models").create_index(["path"], unique=True)
    table_named(db, "settings").create({"key": str, "value": str}, pk="key")


# There is no m002: the number was held for a migration that was never written, and
# databases in the wild have recorded m003 onward, so the gap stays rather than renumbering.
def m003_lab_results(db: sqlite_utils.Database) -> None:
    """Quantization lab measurements: one row per file version, machine and settings."""
    table_named(db, "lab_results").create(
        {
            "path": str,
            "fingerprint": str,
            "machine": str,  # hostname | CPU model | GPU
            "settings": str,  # JSON: threads, GPU layers, window, KV type, evaluation text digest
            "model_id": str,
            "reference_fingerprint": str,
            "result": str,  # JSON of engine.lab.results.LabResult
            "measured_at": float,
        },
        pk=("path", "fingerprint", "machine", "settings"),
    )
    table_named(db, "lab_results").create_index(["path", "machine", "measured_at"])


def m004_api_responses(db: sqlite_utils.Database) -> None:
    """Responses API results kept for ``previous_response_id`` and ``GET /v1/responses/{id}``."""
    table_named(db, "api_responses").create(
        {
            "id": str,
            "previous_response_id": str,
            "model": str,
            "input_items": str,  # JSON list: this request's own input items
            "response": str,  # JSON: the response object as returned
            "created_at": float,
        },
        pk="id",
    )
    table_named(db, "api_responses").create_index(["created_at"])


def m005_model_paths_and_problems(db: sqlite_utils.Database) -> None:
    """One record per file content: other paths to the same content; and why a model cannot run."""
    table_named(db, "model_paths").create({"path": str, "model_id": str}, pk="path")
    table_named(db, "model_paths").create_index(["model_id"])
    # Raw SQL: sqlite-utils' add_column may commit on its own, and this must stay one transaction.
    db.conn.execute("ALTER TABLE models ADD COLUMN problem TEXT")


def m006_api_keys(db: sqlite_utils.Database) -> None:
    """Named API keys for a shared server: only a hash of each key is kept, with its limits."""
    table_named(db, "api_keys").create(
        {
            "name": str,
            "key_hash": str,  # sha256 hex of the key; the key itself is shown once, never stored
            "key_prefix": str,  # the first characters, so a person can tell keys apart
            "requests_per_minute": int,  # NULL: no limit
            "max_streams": int,  # NULL: no limit
            "models": str,  # JSON list of allowed model names; NULL: every model
            "created_at": float,
            "revoked_at": float,  # NULL while the key works
            "last_used_at": float,
            "requests": int,
        },
        pk="name",
    )
    table_named(db, "api_keys").create_index(["key_hash"], unique=True)


def m007_usage_events(db: sqlite_utils.Database) -> None:
    """One row per generation: counts only (never content), for usage totals and cost."""
    table_named(db, "usage_events").create(
        {
            "id": int,
            "at": float,  # when the generation ended (epoch seconds)
            "day": str,  # local date YYYY-MM-DD, for per-day totals without time-zone maths in SQL
            "model_id": str,
            "client": str,  # window | terminal | api:<key name or user agent> | background:<task>
            "prompt_tokens": int,
            "cached_tokens": int,
            "completion_tokens": int,
            "reasoning_tokens": int,  # of the completion tokens, those inside a reasoning block
            "duration_s": float,  # prefill + decode
            "finish_reason": str,
        },
        pk="id",
        not_null={"at", "day", "model_id"},
    )
    table_named(db, "usage_events").create_index(["day"])
    table_named(db, "usage_events").create_index(["at"])


def m008_lora_adapters(db: sqlite_utils.Database) -> None:
    """Imported LoRA adapters (GGUF files used in place), like models: one row per file."""
    table_named(db, "lora_adapters").create(
        {
            "id": str,  # a slug from the file name, e.g. "pirate-lora"
            "path": str,
            "architecture": str,  # the base model's architecture, from the adapter's header
            "base_model": str,  # general.base_model.0.name when the adapter names one
            "rank": int,
            "alpha": float,
            "tensors": int,  # A/B pairs
            "size_bytes": int,
            "mtime": float,
            "fingerprint": str,
            "source": str,  # import | download
            "added_at": float,
        },
        pk="id",
    )
    table_named(db, "lora_adapters").create_index(["path"], unique=True)


def m009_conversation_summaries(db: sqlite_utils.Database) -> None:
    """A long conversation's summary for the sidebar, written by the background model."""
    table_named(db, "conversation_summaries").create(
        {
            "conversation_id": int,
            "summary": str,
            "messages": int,  # how many messages the conversation had when it was summarised
            "updated_at": float,
        },
        pk="conversation_id",
    )


def m010_message_embeddings(db: sqlite_utils.Database) -> None:
    """Each message's embedding for search by meaning, written by the background model.

    Keyed by message and model: another search model means another set of vectors, and
    vectors of two models are never compared. Vectors are float32, unit length.
    ``source_chars`` is the length of the text embedded: a message rewritten since (an answer
    completed after a crash, say) is embedded again.
    """
    table_named(db, "message_embeddings").create(
        {"message_id": int, "model_id": str, "conversation_id": int, "vector": bytes, "source_chars": int,
         "created_at": float},
        pk=("message_id", "model_id"),
    )
    table_named(db, "message_embeddings").create_index(["model_id", "conversation_id"])
    # A vector goes with its message, however the message is deleted (a conversation, a
    # regenerated answer, trimming): SQLite may give a later message the same id again.
    db.conn.execute("CREATE TRIGGER message_embeddings_follow_messages AFTER DELETE ON messages "
                    "BEGIN DELETE FROM message_embeddings WHERE message_id = OLD.id; END")


def m011_kv_cache_auto(db: sqlite_utils.Database) -> None:
    """The KV cache setting becomes "auto" where it holds the old default, f16.

    Until now Settings saved every field, so a stored "f16" is almost always the old default
    written back, not a choice; "auto" is the engine's current default (see
    runtime.fit.kv_cache_type_for). A stored "q8_0" was chosen and stays.
    """
    db.conn.execute("UPDATE settings SET value = ? WHERE key = 'kv_cache_type' AND value = ?",
                    ('"auto"', '"f16"'))


def m012_mcp_servers(db: sqlite_utils.Database) -> None:
    """MCP tool servers (engine/tools), what the person allowed of them, and the calls made.

    Secrets are never here: ``env_keys``/``header_keys`` name the variables and headers whose
    values are in the system keyring (or the owner-only secrets file where there is none).
    ``mcp_permissions`` remembers "always allow" (conversation 0) and "allow in this chat";
    ``mcp_chat_servers`` the servers a chat has enabled; ``mcp_tool_calls`` each call made in a
    chat, with the assistant message that asked and the tool message that answered.
    """
    table_named(db, "mcp_servers").create(
        {"name": str, "transport": str, "command": str, "args": str, "cwd": str, "url": str,
         "env_keys": str, "header_keys": str, "secrets_in": str, "enabled": int, "disabled_tools": str,
         "timeout_s": float, "allow_api": int, "created_at": float},
        pk="name",
    )
    table_named(db, "mcp_permissions").create(
        {"server": str, "tool": str, "conversation_id": int, "created_at": float},
        pk=("server", "tool", "conversation_id"),
    )
    table_named(db, "mcp_chat_servers").create({"conversation_id": int, "server": str},
                                               pk=("conversation_id", "server"))
    table_named(db, "mcp_tool_calls").create(
        {"id": int, "conversation_id": int, "message_id": int, "result_message_id": int, "call_id": str,
         "server": str, "tool": str, "arguments": str, "status": str, "result": str, "duration_s": float,
         "created_at": float},
        pk="id",
    )
    table_named(db, "mcp_tool_calls").create_index(["conversation_id", "message_id"])
    # A call goes with the message that made it (regenerate, trim, delete), and a chat's
    # switches with the chat: SQLite may give a later row the same id again.
    db.conn.execute("CREATE TRIGGER mcp_tool_calls_follow_messages AFTER DELETE ON messages "
                    "BEGIN DELETE FROM mcp_tool_calls WHERE message_id = OLD.id; END")
    db.conn.execute("CREATE TRIGGER mcp_chat_follow_conversations AFTER DELETE ON conversations BEGIN "
                    "DELETE FROM mcp_chat_servers WHERE conversation_id = OLD.id; "
                    "DELETE FROM mcp_permissions WHERE conversation_id = OLD.id; END")


def m015_message_tree(db: sqlite_utils.Database) -> None:
    """Messages form a tree, so regenerating or editing keeps what was there.

    ``messages.parent_id`` is the message a message follows (NULL for a conversation's
    first); answers to the same question, or questions edited from the same point, are
    siblings: the versions of that message. ``conversations.leaf_id`` is the last message
    of the path the person chose (0: the path is empty, before a first question edited;
    NULL: the newest message, as every conversation was before this migration). Existing
    conversations become one path, each message following the one before it.
    """
    table_named(db, "messages").add_column("parent_id", int)
    table_named(db, "conversations").add_column("leaf_id", int)
    db.conn.execute(
        "UPDATE messages SET parent_id = (SELECT MAX(earlier.id) FROM messages AS earlier "
        "WHERE earlier.conversation_id = messages.conversation_id AND earlier.id < messages.id)"
    )
    table_named(db, "messages").create_index(["conversation_id", "parent_id"])


def m013_documents(db: sqlite_utils.Database) -> None:
    """Documents attached to conversations and kept in named collections (issue 30).

    ``documents``: each converted file once, keyed by the SHA-256 of its bytes (the same file
    attached twice, or to two chats, is one row). ``conversation_documents``: a conversation's
    attachments in order (a trigger removes them with their conversation). ``document_collections``
    and ``collection_files``: a named library and the files in it, by path, with the hash and
    modification time they were converted at, so a file is converted again only when its
    hash changed. ``document_passages`` (+ FTS5 and ``passage_vectors``): retrieval.
    """
    table_named(db, "documents").create(
        {"sha256": str, "name": str, "kind": str, "size": int, "text": str, "pages": str, "notes": str,
         "created_at": float},
        pk="sha256",
    )
    table_named(db, "conversation_documents").create(
        {"conversation_id": int, "sha256": str, "position": int},
        pk=("conversation_id", "sha256"),
    )
    db.conn.execute("CREATE TRIGGER conversation_documents_follow_conversations AFTER DELETE ON conversations "
                    "BEGIN DELETE FROM conversation_documents WHERE conversation_id = OLD.id; END")
    # Passages for retrieval when documents do not fit whole: their text, an FTS5 keyword
    # index over it (rowid = passage id), and vectors per embedding model. Each goes with its
    # document, and a passage's index entry and vectors with the passage.
    table_named(db, "document_passages").create(
        {"id": int, "sha256": str, "ordinal": int, "label": str, "text": str}, pk="id")
    table_named(db, "document_passages").create_index(["sha256", "ordinal"])
    db.conn.execute("CREATE VIRTUAL TABLE document_passages_fts USING fts5(text)")
    table_named(db, "passage_vectors").create(
        {"passage_id": int, "model_id": str, "vector": bytes}, pk=("passage_id", "model_id"))
    db.conn.execute("CREATE TRIGGER document_passages_follow_documents AFTER DELETE ON documents "
                    "BEGIN DELETE FROM document_passages WHERE sha256 = OLD.sha256; END")
    db.conn.execute("CREATE TRIGGER passage_parts_follow_passages AFTER DELETE ON document_passages BEGIN "
                    "DELETE FROM document_passages_fts WHERE rowid = OLD.id; "
                    "DELETE FROM passage_vectors WHERE passage_id = OLD.id; END")
    table_named(db, "document_collections").create({"name": str, "created_at": float}, pk="name")
    table_named(db, "collection_files").create(
        {"collection": str, "path": str, "sha256": str, "size": int, "mtime": float, "added_at": float},
        pk=("collection", "path"),
    )


def m016_images(db: sqlite_utils.Database) -> None:
    """Images sent with messages (issue 31): ``message_images`` links a message to its images
    in order. The files live in the data folder's ``images/``, named by ``digest`` (the
    image's pixel hash, also its key in the prefix cache), so the same picture in two
    messages is one file; a trigger removes a message's links with it, and a file no link
    names any more is removed by ``MessageImages.collect``."""
    table_named(db, "message_images").create(
        {"message_id": int, "position": int, "digest": str, "mime": str, "size": int, "width": int,
         "height": int},
        pk=("message_id", "position"),
    )
    table_named(db, "message_images").create_index(["digest"])
    db.conn.execute("CREATE TRIGGER message_images_follow_messages AFTER DELETE ON messages "
                    "BEGIN DELETE FROM message_images WHERE message_id = OLD.id; END")


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [
    m001_initial,
    m003_lab_results,
    m004_api_responses,
    m005_model_paths_and_problems,
    m006_api_keys,
    m007_usage_events,
    m008_lora_adapters,
    m009_conversation_summaries,
    m010_message_embeddings,
    m011_kv_cache_auto,
    m012_mcp_servers,
    m013_documents,
    m015_message_tree,
    m016_images,
]
