"""The live coordinator's clients lost and back: a lost client that speaks again, on its old socket or as a new
process saying HELLO for its rank, is set up for the algorithm in progress and rejoins it (coordinator.py's
mixin: the message loop is there, this is what it does when membership changes)."""
from __future__ import annotations

import logging

from edgesync.algorithms.machinery.base import Send, ServerAlgorithm
from edgesync.transport.protocol import Message, MessageType as T

log = logging.getLogger("edgesync.coordinator")


class Rejoin:
    """The Coordinator's methods for membership changes mid-algorithm (its attributes are the Coordinator's)."""

    def _client_lost(self, rank: int) -> None:
        self.joining.pop(rank, None)
        self.fleet.lost(rank)
        if self.server is not None:
            self._dispatch(self.server.on_client_lost(rank))  # a barrier closes without it; ESync stops waiting
            self.account.log_updates(self.server.drain_update_log(), self._now())  # a round closed or drawn again

    def _back(self, server: ServerAlgorithm, rank: int, msg: Message) -> list[Send]:
        """A lost client spoke. One set up for the algorithm in progress (the same process, paused or cut
        off) is back now; any other (a new process that said HELLO, or one lost in an earlier algorithm)
        is set up first and back once it answers (READY, then CALIBRATED)."""
        owed = self.joining.get(rank)
        if owed is None and self.phases.set_up_for.get(rank) != self.account.key:
            self.joining[rank] = T.READY
            self.phases.send_setup(self.account.config, rank)
            return []
        if owed is not None:
            if msg.type != owed:
                return []
            if msg.type == T.READY:  # its step paced as the algorithm's plan says (it measures first if new)
                self.joining[rank] = T.CALIBRATED
                self.members.send(rank, self.phases.pace(rank))
                return []
            if msg.type == T.CALIBRATED:
                self.phases.note_calibrated(rank, msg.meta)
            del self.joining[rank]
        self.members.liveness.back(rank)
        log.info("client %d is back", rank)
        if self.availability.back(rank, self._handled_at):
            self.account.log_presence(rank, True, self._handled_at)
        sends = server.on_client_joined(rank)
        self.account.log_updates(server.drain_update_log(), self._handled_at)  # a round it starts, at its time
        return sends

    def _readmit(self, server: ServerAlgorithm, identity: bytes, msg: Message) -> list[Send]:
        """HELLO mid-algorithm: a client process that lost its link (or was restarted) asks for its rank
        back. It may take a lost rank (a live one is refused, not fatally: the client retries with backoff
        until its old socket is known to be gone); it is set up for the algorithm and joins it when READY."""
        members = self.members
        asked = msg.meta.get("rank")
        if asked is None:  # a restarted client that did not say its rank: a lost one, of its host if any
            host = (msg.meta.get("info") or {}).get("host") if isinstance(msg.meta.get("info"), dict) else None
            lost = sorted(members.liveness.lost, key=lambda r: (self.peers[r].info.get("host") != host, r))
            if not lost:
                members.reject(identity, "the run is in progress and every rank is held by a live client; "
                                         "asking again until one is lost")
                return []
            asked = lost[0]
        if not isinstance(asked, int) or asked not in self.peers:
            members.reject(identity, f"rank {asked!r} is not one of this run's (0..{members.size - 1})", fatal=True)
            return []
        if self.availability.is_offline(asked, self._now()):
            back = self.availability.online_at(asked, self._now())
            members.reject(identity, f"client {asked} is offline until {back:.1f} s of the algorithm (its availability); "
                                     "asking again", expected=True)
            return []
        if asked not in members.liveness.lost:
            if self.peers[asked].same_process(msg):
                members.lose(asked, "it said HELLO again on a new socket")  # the old socket is gone
            elif why := members.gone(asked):  # a restarted client: its earlier process is provably gone
                members.lose(asked, f"a new process asks for its rank and the earlier one is gone ({why})")
            else:  # the old process may still be alive: the client asks again with backoff
                members.reject(identity, f"rank {asked} is held by a live client; asking again until it is gone "
                                         f"(at most faults.client_timeout_s = {members.liveness.timeout_s:g} s)")
                return []
        members.forget(asked)
        self.phases.set_up_for.pop(asked, None)  # a new process or socket: nothing is set up on it
        self.joining.pop(asked, None)  # a SETUP sent to its old socket is lost with it: sent again below
        members.admit(identity, Message(T.HELLO, {**msg.meta, "rank": asked}))
        return self._back(server, asked, msg)
