# Helpers shared by worker.sh and job.sh (sourced, POSIX sh).

# One event line on fd 3: one printf, one write(2), so it is atomic on the harness's pipe.
emit() { printf '%s\n' "$1" >&"${FENCECHECK_EVENTS_FD:-3}"; }

# Gives up for good, saying so first: job.gave_up with the reason $1 (made JSON-safe), the protocol's
# one way to say it (an exit 1 alone is a crash: docs/worker-protocol.md), then exit 1.
give_up() {
  emit "$(printf '{"kind":"job.gave_up","detail":"%s"}' "$(printf '%s' "$1" | tr -d '"\\\000-\037')")"
  echo "worker.sh: giving up: $1" >&2
  exit 1
}

# CRC-32 (IEEE, as zlib.crc32) of $1 as 8 lower-case hex digits. gzip's trailer (RFC 1952 §2.3.1)
# is that CRC-32 of the uncompressed data, little-endian, then the length: the last 8 bytes of
# gzip's output. od prints its first 4 bytes in file order; they are read back most significant first.
crc32() {
  # shellcheck disable=SC2046 # word splitting into the four bytes is the point
  set -- $(printf '%s' "$1" | gzip -c | tail -c 8 | od -An -tx1 -N4)
  printf '%s%s%s%s' "$4" "$3" "$2" "$1"
}

# The chunk's self-describing bytes, exactly as workers/proto/src/chunk.cpp's encode_chunk:
#   fc1 w=<worker> t=<token> k=<key> s=<segment> c=<chunk> f=<x filler> crc=<crc32 hex>
# the filler brings the whole to $6 bytes (none when the header alone is that long), and the CRC
# covers everything before " crc=". Args: worker token key segment chunk size.
encode_chunk() {
  _head="fc1 w=$1 t=$2 k=$3 s=$4 c=$5 f="
  _fill=$(($6 - ${#_head} - 13))  # 13 = " crc=" and 8 hex digits
  if [ "$_fill" -gt 0 ]; then
    _head="$_head$(printf "%${_fill}s" '' | tr ' ' x)"
  fi
  printf '%s crc=%s' "$_head" "$(crc32 "$_head")"
}
