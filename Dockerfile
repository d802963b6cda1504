# The tokenbed agent image: the static agent binary and nothing else.
# FROM scratch needs no registry (none is reachable on the test machines),
# and the agent is built with CGO_ENABLED=0, so it needs no libc.
#
#   make image                       # builds bin/agent, then tokenbed-agent:dev
#   docker run --rm tokenbed-agent:dev version
#
# The build context is the directory holding the agent binary as "agent"
# (make image sends only that file and this one). harness run --backend
# container builds its own per-run image from the same lines plus the pod
# holder (harness/backend/ctrbackend, Dockerfile constant), and removes it
# at the end of the run.
FROM scratch
COPY agent /
ENTRYPOINT ["/agent"]
