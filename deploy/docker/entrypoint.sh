#!/usr/bin/env bash
# Entrypoint of the gpupipe image (installed as /usr/local/bin/gpupipe-entrypoint). It turns
# the container's environment into gpupiped flags and then replaces itself with the daemon, so
# that the daemon is PID 1 and gets the SIGTERM of `docker stop` or of the kubelet directly.
#
#   gpupipe-entrypoint [FLAGS...]        run gpupiped; FLAGS go to it last and win over the
#                                        environment (gpupiped --help lists them)
#   gpupipe-entrypoint health [--service NAME]
#                                        ask the local daemon's health service, with the same
#                                        TLS settings the daemon was given: the image's
#                                        HEALTHCHECK and Kubernetes exec probes
#   gpupipe-entrypoint COMMAND [ARGS...] run another command (e.g. gpupipe, gpupiped --help)
#
# Environment (file paths are of files mounted into the container):
#   GPUPIPE_BACKEND              cuda (default): refuse to start without a usable GPU, so a
#                                node whose GPU or driver is broken fails loudly instead of
#                                serving on its CPU; auto: the GPU if usable, else the CPU (for
#                                mixed fleets, where `gpupipe describe` and the gpupipe_info
#                                metric say which backend serves); cpu
#   GPUPIPE_LISTEN               default 0.0.0.0:50051
#   GPUPIPE_METRICS_LISTEN       default 0.0.0.0:9464; empty for no metrics endpoint
#   GPUPIPE_PRIORITY_LISTEN      the priority listener's address (--priority-listen), such as
#                                0.0.0.0:50052; default none. It has the same TLS and tokens
#   GPUPIPE_TLS_CERT_FILE, GPUPIPE_TLS_KEY_FILE
#                                serve TLS with this certificate chain and private key (PEM)
#   GPUPIPE_TLS_CLIENT_CA_FILE   require client certificates signed by this CA (mutual TLS)
#   GPUPIPE_TOKEN_FILE           require tokens from this file, `name:token` per line;
#                                `docker kill -s HUP` makes the daemon re-read it
#   GPUPIPE_TOKENS               the same file's content itself (for a Secret exposed as an
#                                environment variable): written to a 0600 file under
#                                ${TMPDIR:-/tmp}, since the root filesystem may be read-only,
#                                and removed from the daemon's environment
# For the health check only:
#   GPUPIPE_TLS_CA_FILE          the CA that signed the server certificate (default: the
#                                certificate file itself, which works when it is self-signed
#                                or carries its root CA)
#   GPUPIPE_HEALTH_TLS_CERT_FILE, GPUPIPE_HEALTH_TLS_KEY_FILE
#                                under mutual TLS, a client certificate the client CA signed
#                                (default: the server's own pair, which works when one CA
#                                signs both and the server certificate is not restricted to
#                                serverAuth)
#   GPUPIPE_HEALTH_TARGET        default 127.0.0.1 and the port of GPUPIPE_LISTEN; under TLS
#                                the server certificate must name it (IP:127.0.0.1 in its
#                                subjectAltName), or set a name it carries that resolves to
#                                this container, such as localhost:50051
#
# With neither TLS nor tokens the daemon is started with --insecure, since it refuses
# plaintext without tokens beyond loopback otherwise; that is said on stderr.
set -euo pipefail

prog=gpupipe-entrypoint

die() {
  echo "$prog: $*" >&2
  exit 2
}

# Whether the arguments after the first set FLAG themselves (`--flag value` or `--flag=value`).
given() {
  local flag=$1 arg
  shift
  for arg in "$@"; do
    [[ $arg == "$flag" || $arg == "$flag="* ]] && return 0
  done
  return 1
}

readable() {  # NAME PATH
  [[ -r $2 && ! -d $2 ]] || die "$1=$2: not a readable file (is it mounted, and readable by uid $(id -u)?)"
}

run_daemon() {
  if given --help "$@" || given --version "$@"; then
    exec gpupiped "$@"
  fi
  local flags=() secured=0
  local listen=${GPUPIPE_LISTEN:-0.0.0.0:50051}
  given --listen "$@" || flags+=(--listen "$listen")
  given --metrics-listen "$@" || flags+=(--metrics-listen "${GPUPIPE_METRICS_LISTEN-0.0.0.0:9464}")
  if [[ -n ${GPUPIPE_PRIORITY_LISTEN:-} ]] && ! given --priority-listen "$@"; then
    flags+=(--priority-listen "$GPUPIPE_PRIORITY_LISTEN")
  fi
  given --backend "$@" || flags+=(--backend "${GPUPIPE_BACKEND:-cuda}")

  if [[ -n ${GPUPIPE_TLS_CERT_FILE:-} || -n ${GPUPIPE_TLS_KEY_FILE:-} ]]; then
    [[ -n ${GPUPIPE_TLS_CERT_FILE:-} && -n ${GPUPIPE_TLS_KEY_FILE:-} ]] ||
      die "GPUPIPE_TLS_CERT_FILE and GPUPIPE_TLS_KEY_FILE go together"
    readable GPUPIPE_TLS_CERT_FILE "$GPUPIPE_TLS_CERT_FILE"
    readable GPUPIPE_TLS_KEY_FILE "$GPUPIPE_TLS_KEY_FILE"
    flags+=(--tls-cert "$GPUPIPE_TLS_CERT_FILE" --tls-key "$GPUPIPE_TLS_KEY_FILE")
    secured=1
  fi
  if [[ -n ${GPUPIPE_TLS_CLIENT_CA_FILE:-} ]]; then
    [[ -n ${GPUPIPE_TLS_CERT_FILE:-} ]] ||
      die "GPUPIPE_TLS_CLIENT_CA_FILE: client certificates need TLS (GPUPIPE_TLS_CERT_FILE and GPUPIPE_TLS_KEY_FILE)"
    readable GPUPIPE_TLS_CLIENT_CA_FILE "$GPUPIPE_TLS_CLIENT_CA_FILE"
    flags+=(--tls-client-ca "$GPUPIPE_TLS_CLIENT_CA_FILE")
  fi

  if [[ -n ${GPUPIPE_TOKEN_FILE:-} && -n ${GPUPIPE_TOKENS:-} ]]; then
    die "set GPUPIPE_TOKEN_FILE or GPUPIPE_TOKENS, not both"
  fi
  if [[ -n ${GPUPIPE_TOKEN_FILE:-} ]]; then
    readable GPUPIPE_TOKEN_FILE "$GPUPIPE_TOKEN_FILE"
    flags+=(--token-file "$GPUPIPE_TOKEN_FILE")
    secured=1
  elif [[ -n ${GPUPIPE_TOKENS:-} ]]; then
    # Written whole and then renamed, so that the daemon never reads half a table; one fixed
    # name, so that a restarted container replaces the file rather than leaving copies.
    local file=${TMPDIR:-/tmp}/gpupipe-tokens
    (umask 077 && printf '%s\n' "$GPUPIPE_TOKENS" >"$file.new") ||
      die "cannot write $file.new (mount a writable tmpfs at ${TMPDIR:-/tmp})"
    mv -f "$file.new" "$file"
    flags+=(--token-file "$file")
    secured=1
  fi
  # The tokens stay in the file only: the daemon's environment is readable in /proc by every
  # process of its user.
  unset GPUPIPE_TOKENS

  if ((!secured)) && ! given --tls-cert "$@" && ! given --token-file "$@" && ! given --insecure "$@"; then
    echo "$prog: neither TLS (GPUPIPE_TLS_CERT_FILE, GPUPIPE_TLS_KEY_FILE) nor tokens" \
      "(GPUPIPE_TOKEN_FILE, GPUPIPE_TOKENS) are configured: serving plaintext without tokens" \
      "(--insecure); anyone who can reach this container's port can run jobs" >&2
    flags+=(--insecure)
  fi
  exec gpupiped "${flags[@]}" "$@"
}

health() {
  # Only what this function passes may decide how the CLI connects.
  unset GPUPIPE_TARGET GPUPIPE_TLS_CA GPUPIPE_TOKEN
  local listen=${GPUPIPE_LISTEN:-0.0.0.0:50051}
  # A deadline well inside the probes' timeouts, so that a hung daemon reads as unhealthy
  # rather than as a probe that timed out.
  local args=(--target "${GPUPIPE_HEALTH_TARGET:-127.0.0.1:${listen##*:}}" --deadline 3)
  if [[ -n ${GPUPIPE_TLS_CERT_FILE:-} ]]; then
    args+=(--tls-ca "${GPUPIPE_TLS_CA_FILE:-$GPUPIPE_TLS_CERT_FILE}")
    if [[ -n ${GPUPIPE_TLS_CLIENT_CA_FILE:-} ]]; then
      args+=(--tls-cert "${GPUPIPE_HEALTH_TLS_CERT_FILE:-$GPUPIPE_TLS_CERT_FILE}"
        --tls-key "${GPUPIPE_HEALTH_TLS_KEY_FILE:-${GPUPIPE_TLS_KEY_FILE:-}}")
    fi
  fi
  # The health service answers without a token, so none is sent.
  exec gpupipe "${args[@]}" health "$@"
}

case ${1:-} in
  health)
    shift
    health "$@"
    ;;
  '' | -*) run_daemon "$@" ;;
  *) exec "$@" ;;
esac
