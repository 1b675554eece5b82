"""spark-run --interactive and Ctrl-C: SIGINT while an answer streams stops that answer (stderr:
"stopped (Ctrl-C)"), the chat goes on and answers the next line, and end of input (Ctrl-D) ends
it with exit status 0. Prints what it saw.

usage: interactive_ctrl_c.py SPARK_RUN ARGS...
"""
import os
import select
import signal
import subprocess
import sys
import time


def main():
    proc = subprocess.Popen(sys.argv[1:] + ["--interactive"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.set_blocking(proc.stdout.fileno(), False)
    proc.stdin.write(b"Tell me a very long story.\n")
    proc.stdin.flush()
    # Wait for the answer to start streaming, then press Ctrl-C.
    seen = b""
    deadline = time.time() + 60
    while not seen and time.time() < deadline:
        select.select([proc.stdout], [], [], 0.05)
        seen += proc.stdout.read() or b""
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.stdin.write(b"And another one.\n")
    proc.stdin.close()
    os.set_blocking(proc.stdout.fileno(), True)
    out = seen + proc.stdout.read()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    answers = [line for line in err.splitlines() if line.startswith("spark-run: decode:")]
    print("exit", code)
    print("turns", len(answers))
    print("first stopped by Ctrl-C:", "stopped (Ctrl-C)" in answers[0] if answers else None)
    print("second ran:", len(answers) > 1 and "stopped (Ctrl-C)" not in answers[1])
    print("answer lines", out.count(b"\n"))


if __name__ == "__main__":
    main()
