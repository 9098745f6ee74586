# A loopback echo pair for tests/cpu/run.sh: this process serves, a forked
# child is the client. Both wait asleep until a line comes through the FIFO
# GO (the client blocks in its open, the server in accept), exchange one-byte
# messages over TCP for SECS seconds (a switch and a softirq each way), then
# write DONE and sleep until killed, so that their CPU stands still for the
# test to read before and after.
import os
import socket
import sys
import time

go, done, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(1)
port = ls.getsockname()[1]
child = os.fork()
if child == 0:
    with open(go) as f:
        f.read()
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    end = time.monotonic() + secs
    while time.monotonic() < end:
        s.sendall(b"x")
        s.recv(64)
    s.close()
    time.sleep(3600)
    os._exit(0)
c, _ = ls.accept()
while c.recv(64):
    c.sendall(b"x")
with open(done, "w") as f:
    f.write("%d\n" % child)
time.sleep(3600)
