# bench/kraft.sh: how the bench configures Apache Kafka brokers in KRaft mode,
# broker and controller in each JVM, everything on 127.0.0.1. Sourced by
# bench/run.sh and bench/kafka-cluster.sh; defines functions only.
#
# A cluster of N > 1 nodes: every node is a voter of the controller quorum,
# formatted with `StorageTool format --initial-controllers "$(kraft_voters
# CPORT...)"` (the same value on every node); a single node is formatted with
# --standalone. Internal topics get replication factor N, and on N >= 2
# min.insync.replicas 2 (the broker default for every topic, so acks=all waits
# for two copies).

# kraft_directory_id: a random KRaft directory id, a Kafka Uuid: 16 random
# bytes in URL-safe base64 without padding. Kafka's own random ids never start
# with '-' (it would read as a command-line option), so neither do these.
kraft_directory_id() {
  local id
  while :; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    [[ $id == -* ]] || { echo "$id"; return 0; }
  done
}

# kraft_voters CPORT...: the --initial-controllers value for nodes 1..N whose
# controller listeners are 127.0.0.1:CPORT, in node order:
# "1@127.0.0.1:CPORT1:DIRID1,2@...", each with a fresh directory id.
kraft_voters() {
  local i=0 port out=""
  for port in "$@"; do
    i=$((i + 1))
    out+="${out:+,}$i@127.0.0.1:$port:$(kraft_directory_id)"
  done
  echo "$out"
}

# kraft_quorum CPORT...: controller.quorum.bootstrap.servers for those ports.
kraft_quorum() {
  local port out=""
  for port in "$@"; do out+="${out:+,}127.0.0.1:$port"; done
  echo "$out"
}

# kraft_server_properties ID N LISTENER DATA_DIR QUORUM PORT CPORT: the
# server.properties of node ID of N: the client (and inter-broker) listener
# LISTENER (PLAINTEXT, SSL or SASL_SSL; its own settings are the caller's) on
# 127.0.0.1:PORT, the controller listener (always PLAINTEXT) on
# 127.0.0.1:CPORT, the log in DATA_DIR, the quorum from kraft_quorum.
kraft_server_properties() {
  local id=$1 n=$2 ln=$3 data=$4 quorum=$5 port=$6 cport=$7
  local min_isr=$((n >= 2 ? 2 : 1))
  cat <<EOF
# KRaft node $id of $n, broker and controller in one JVM; the controller
# listener stays PLAINTEXT whatever the clients' listener is
process.roles=broker,controller
node.id=$id
controller.quorum.bootstrap.servers=$quorum
listeners=$ln://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=$ln://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
listener.security.protocol.map=$ln:$ln,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=$ln
log.dirs=$data
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=$n
transaction.state.log.replication.factor=$n
transaction.state.log.min.isr=$min_isr
share.coordinator.state.topic.replication.factor=$n
share.coordinator.state.topic.min.isr=$min_isr
group.initial.rebalance.delay.ms=0
EOF
  ((n >= 2)) && echo "min.insync.replicas=$min_isr"
  return 0
}
