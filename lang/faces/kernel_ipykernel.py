"""Every use the kernel makes of ipykernel's private API, in one place: stop-on-error without
ipykernel's race.

What users see (README, tests/faces/test_kernel_adapter.py): after a cell fails or is interrupted, the
cells that were already queued behind it are aborted (Jupyter's stop-on-error, so an Interrupt
also drops the queued cells), and a cell the client sends on seeing the error reply runs.

ipykernel 7.x (with its shell-channel thread) raced after an error reply: it sends the reply,
then sets its "aborting" flag and posts the message that ends the aborting; a request the client
sent on seeing the reply could overtake that message and come back `aborted`, so the cell after
an interrupted one was sometimes not run. `StopOnError`, a mixin of the kernel class, posts the
end-of-aborting message before the reply goes out (`post_stop_aborting`, which the kernel calls
after sending the error), so the requests that reached the kernel before the error was replied
are aborted and none sent on seeing the reply is; `_abort_queues` then only sets the flag.

ipykernel offers no public hook for either step. The private names used, and only here:
`Kernel._abort_queues` (overridden), `Kernel._post_dummy_stop_aborting_message`,
`Kernel.shell_channel_thread` (its `io_loop` and `manager.set_subshell_aborting`) and
`Kernel._aborting`. Without the shell-channel thread or the posting method (ipykernel 6) nothing
here acts and the base class does it all, as it did there.
"""
from __future__ import annotations


class StopOnError:
    """Mixin for the ipykernel Kernel subclass (listed before Kernel among its bases)."""

    _stop_aborting_for = None       # the request whose end-of-aborting message is already posted

    def begin_request(self) -> None:
        """A new execute request: nothing posted for it yet."""
        self._stop_aborting_for = None

    def post_stop_aborting(self, parent) -> None:
        """Post ipykernel's end-of-aborting message now, before the error reply of `parent` goes
        out (the module's docstring says why); `_abort_queues` then only sets the flag."""
        thread = getattr(self, "shell_channel_thread", None)
        post = getattr(self, "_post_dummy_stop_aborting_message", None)
        if thread is None or post is None:
            return
        thread.io_loop.add_callback(post, parent["header"].get("subshell_id"))
        self._stop_aborting_for = parent["header"].get("msg_id")

    def _abort_queues(self, subshell_id=None):
        parent = self.get_parent("shell")
        if self._stop_aborting_for is None or \
                self._stop_aborting_for != parent.get("header", {}).get("msg_id"):
            return super()._abort_queues(subshell_id)
        self._stop_aborting_for = None
        if subshell_id is None:
            self._aborting = True
        else:
            self.shell_channel_thread.manager.set_subshell_aborting(subshell_id, True)
