#!/usr/bin/env python3
"""-m chat in a pseudo-terminal: Ctrl-C during a reply returns to the
prompt, Ctrl-C at the prompt ends the chat with status 0.

    chat_pty.py RUN MODEL TOKENIZER

Exits 0 when both hold, 1 with what was seen otherwise."""
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


def main(run, model, tokenizer):
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
    read_until(fd, b"\xff", 5)       # drain until it exits
    for _ in range(100):             # 10 s, then it is a failure, not a hang
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        sys.stderr.write("the second Ctrl-C did not end the chat\n")
        return 1
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        sys.stderr.write("the second Ctrl-C ended the chat with status %r\n" % status)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
