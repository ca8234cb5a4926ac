"""A source server as the metadata DB knows it: its ``@@server_id`` and the epoch of its
binlog positions (``model.position``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ServerEpoch"]


@dataclass(frozen=True, slots=True)
class ServerEpoch:
    """``server_id``: the server's ``@@server_id`` (unique among the servers of one
    replication topology); ``epoch``: what every position read from it carries."""

    server_id: int
    epoch: int

    def __str__(self) -> str:
        return f"server_id {self.server_id} (epoch {self.epoch})"
