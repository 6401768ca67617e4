#!/usr/bin/env python3
"""-m chat in a pseudo-terminal, reading what the screen shows.

    chat_pty.py ctrl-c RUN MODEL TOKENIZER
        Ctrl-C during a reply returns to the prompt, Ctrl-C at the prompt
        ends the chat with status 0.
    chat_pty.py skip RUN MODEL TEMPLATE
        A turn the vocabulary cannot encode ('I love thee <3' where it has
        no '<') is skipped with a warning naming the character and the
        template, the next turn gets a reply, and EOF (Ctrl-D) ends the chat
        with status 0; control: the same good turn typed alone gets the same
        reply and no warning.  The screens are printed.

Exits 0 when all of it holds, 1 with what was seen otherwise."""
import os
import pty
import select
import sys
import time


def read_until(fd, needle, seconds):
    """Output until `needle` appears (returns it all) or the time is up (None)."""
    seen = b""
    end = time.time() + seconds
    while time.time() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            if needle in seen:
                return seen
    sys.stderr.write("timed out waiting for %r; saw %r\n" % (needle, seen[-400:]))
    return None


def drain(fd, seconds):
    """Output until the chat closes the terminal (or the time is up)."""
    seen = b""
    end = time.time() + seconds
    while time.time() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:          # EIO: the other end is closed
                break
            if not chunk:
                break
            seen += chunk
    return seen


def exit_status(pid, what):
    """The chat's exit status once it ends (within 10 s), or None after killing it."""
    for _ in range(100):             # 10 s, then it is a failure, not a hang
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.1)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    sys.stderr.write("%s did not end the chat\n" % what)
    return None


def ctrl_c(run, model, tokenizer):
    pid, fd = pty.fork()
    if pid == 0:
        # a long reply (-n 0: until the context), slow enough to interrupt
        os.execv(run, [run, model, "-z", tokenizer, "-m", "chat", "--chat-template", "llama2",
                       "-t", "1", "-s", "7", "-n", "0", "--ctx", "512"])
    if read_until(fd, b"> ", 30) is None:
        return 1
    os.write(fd, b"Tell me a very long story.\n")
    if read_until(fd, b"Tell me a very long story.\r\n", 10) is None:   # the terminal's echo
        return 1
    time.sleep(0.05)
    os.write(fd, b"\x03")            # the terminal turns ^C into SIGINT
    if read_until(fd, b"> ", 30) is None:
        sys.stderr.write("the first Ctrl-C did not return to the prompt\n")
        return 1
    os.write(fd, b"\x03")
    drain(fd, 5)
    status = exit_status(pid, "the second Ctrl-C")
    if status is None:
        return 1
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        sys.stderr.write("the second Ctrl-C ended the chat with status %r\n" % status)
        return 1
    return 0


def session(run, model, template, turns):
    """Types each turn at the prompt, then Ctrl-D: (the screen, each turn's
    output up to the next prompt, the exit status), or None."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(run, [run, model, "-m", "chat", "--chat-template", template, "-t", "0", "-n", "12"])
    screen = read_until(fd, b"> ", 30)
    if screen is None:
        return None
    outputs = []
    for turn in turns:
        os.write(fd, turn + b"\n")
        echo = turn + b"\r\n"        # the terminal echoes the line, output follows it
        shown = read_until(fd, b"\n> ", 60)
        if shown is None or not shown.startswith(echo):
            sys.stderr.write("no prompt after %r: %r\n" % (turn, shown))
            return None
        screen += shown
        outputs.append(shown[len(echo):-len(b"> ")])
    os.write(fd, b"\x04")            # Ctrl-D at the start of a line: EOF
    screen += drain(fd, 5)
    status = exit_status(pid, "Ctrl-D")
    return None if status is None else (screen, outputs, status)


def skip(run, model, template):
    bad, good = b"I love thee <3", b"ROMEO: hello"
    both = session(run, model, template, [bad, good])
    alone = session(run, model, template, [good])
    if both is None or alone is None:
        return 1
    for name, (screen, _, _) in (("bad then good", both), ("good alone", alone)):
        sys.stdout.write("--- screen, %s ---\n%s\n" % (name, screen.decode("utf-8", "replace")))
    warning = both[1][0]
    failures = []
    if not (warning.startswith(b"warning: turn skipped: ") and
            b"'<' (byte 0x3C) has no token" in warning and template.encode() in warning):
        failures.append("the bad turn's output is not the warning naming '<' and the template: %r"
                        % warning)
    reply = both[1][1]
    if len(reply.strip()) < 2 or b"warning" in reply:
        failures.append("no reply to the good turn: %r" % reply)
    if reply != alone[1][0]:
        failures.append("control: the reply after the skipped turn %r is not the reply alone %r"
                        % (reply, alone[1][0]))
    if b"warning" in alone[0]:
        failures.append("control: a warning without the bad turn")
    for name, (_, _, status) in (("bad then good", both), ("good alone", alone)):
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            failures.append("%s: Ctrl-D ended the chat with status %r" % (name, status))
    for f in failures:
        sys.stderr.write(f + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    scenarios = {"ctrl-c": ctrl_c, "skip": skip}
    if len(sys.argv) != 5 or sys.argv[1] not in scenarios:
        sys.exit(__doc__)
    sys.exit(scenarios[sys.argv[1]](*sys.argv[2:5]))
