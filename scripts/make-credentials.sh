#!/bin/sh
# Makes a credentials folder for the bulk data path's TLS (`--credentials DIR`): a new CA
# (DIR/ca.crt, DIR/ca.key) and one certificate it signs (DIR/tls.crt, DIR/tls.key) for the names
# given (default: localhost and 127.0.0.1), usable by workers and mounts alike (server and client
# authentication). For tests, benchmarks and trying TLS out; a real cluster's CA and certificates
# come from its own PKI (e.g. a Kubernetes TLS secret plus the CA).
#
# Usage: scripts/make-credentials.sh DIR [NAME...]   (a NAME that is an IP address becomes an IP SAN)
set -eu
if [ $# -lt 1 ]; then
  echo "usage: $0 DIR [NAME...]" >&2
  exit 2
fi
dir=$1
shift
[ $# -gt 0 ] || set -- localhost 127.0.0.1
san=""
for name in "$@"; do
  case $name in
    *[!0-9.:]*) entry="DNS:$name" ;;
    *) entry="IP:$name" ;;
  esac
  san="${san:+$san,}$entry"
done
mkdir -p "$dir"
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj "/CN=lakecache test CA $$" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
  -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n' \
  "$san" >"$dir/ext.cnf"
openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
  -days 30 -extfile "$dir/ext.cnf" -out "$dir/tls.crt" 2>/dev/null
rm -f "$dir/tls.csr" "$dir/ext.cnf" "$dir/ca.srl"
