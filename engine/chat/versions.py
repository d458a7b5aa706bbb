"""Versions of messages: answers regenerated and questions edited stay beside each other,
one chosen; a message can be rewritten or deleted in place, or a conversation branched at it.

``ChatService`` takes these methods from ``MessageVersions``; the attributes below are the
service's, set in its ``__init__``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..base import InvalidRequest
from ..store import Conversation, Message, PrefixCache, Store

if TYPE_CHECKING:
    from .images import ChatImages


class MessageVersions:
    """Choosing, editing and branching a conversation's messages."""

    store: Store
    cache: PrefixCache | None
    images: ChatImages

    def edit_message(self, message_id: int, text: str) -> Message:
        """Rewrite any message in place, the model's included (no new answer)."""
        if not text.strip():
            raise InvalidRequest("the message is empty", param="content")
        if self.store.get_message(message_id).role == "assistant":
            # The figures were the generated text's; the person's text has none.
            return self.store.update_message(message_id, content=text, completion_tokens=None, tokens_per_s=None,
                                             ttft_ms=None)
        return self.store.update_message(message_id, content=text)

    def delete_message(self, message_id: int) -> list[Message]:
        """Delete one message (and none after it); returns the conversation's path."""
        message = self.store.get_message(message_id)
        self.store.delete_message(message_id)
        self.images.files.collect()
        return self.store.messages(message.conversation_id)

    def versions(self, message_id: int) -> list[Message]:
        """``message_id`` and its other versions (regenerated answers, edited questions)."""
        return self.store.versions(message_id)

    def version_sets(self, conversation_id: int) -> dict[int, list[int]]:
        """Message id → the ids of all its versions, for messages that have more than one."""
        return self.store.version_sets(conversation_id)

    def choose_version(self, message_id: int) -> list[Message]:
        """Show this version of a message (and the newest branch after it); returns the path."""
        return self.store.choose_version(message_id)

    def branch(self, message_id: int) -> Conversation:
        """A new conversation holding this one up to ``message_id``, with its settings; its
        first answer starts from the saved prompt state of the conversation it came from."""
        message = self.store.get_message(message_id)
        source = self.store.get_conversation(message.conversation_id)
        path = self.store.messages(source.id)
        upto = next((i for i, m in enumerate(path) if m.id == message_id), None)
        if upto is None:
            raise InvalidRequest("only a message on the conversation's chosen path can start a branch")
        branch = self.store.create_conversation(
            title=f"{source.title or 'New chat'} (branch)", model_id=source.model_id,
            system_prompt=source.system_prompt, sampling=source.sampling)
        for kept in path[:upto + 1]:
            stats = {k: v for k, v in dataclasses.asdict(kept).items()
                     if k not in ("id", "conversation_id", "role", "content", "parent_id")}
            copied = self.store.add_message(branch.id, kept.role, kept.content, **stats)
            self.images.files.copy(kept.id, copied.id)  # the same files: a branch shows its images
        if self.cache is not None:
            self.cache.copy_conversation(source.id, branch.id)
        # The copies keep their messages' times, which set the chat's own: it is new now, so it
        # sorts above its source and says so, instead of "1m" below it.
        return self.store.update_conversation(branch.id, title=branch.title)
