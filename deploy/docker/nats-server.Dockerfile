# baton/nats-server: a static nats-server built from the module version pinned
# in go.mod, and the compose cluster's configs (deploy/nats/). Built by
# `make images` with a context holding only the binary and the configs.
FROM scratch
COPY nats-server /nats-server
COPY *.conf /etc/nats/
VOLUME /data
EXPOSE 4222 6222 8222
ENTRYPOINT ["/nats-server"]
CMD ["-c", "/etc/nats/n1.conf"]
