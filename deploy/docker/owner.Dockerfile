# baton/owner: the static bin/owner (CGO_ENABLED=0) and nothing else.
# Built by `make images` with a context holding only the binary.
FROM scratch
COPY owner /owner
ENTRYPOINT ["/owner"]
