# baton/ingress: the static bin/ingress (CGO_ENABLED=0) and nothing else.
# Built by `make images` with a context holding only the binary.
FROM scratch
COPY ingress /ingress
ENTRYPOINT ["/ingress"]
