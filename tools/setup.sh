#!/usr/bin/env bash
# Installs the Debian 12 packages vapipe needs to build, run and test, if any is missing.
# Idempotent: a machine that has everything runs no apt-get at all.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libgstreamer-plugins-bad1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
  gstreamer1.0-plugins-ugly gstreamer1.0-libav gstreamer1.0-rtsp libgstrtspserver-1.0-dev
  glib-networking  # TLS for rtsps:// and https:// cameras (GIO), and ingest's own TLS check
  libzmq3-dev cppzmq-dev libspdlog-dev libyaml-cpp-dev nlohmann-json3-dev libcpp-httplib-dev libssl-dev
  libmosquitto-dev  # publish.mqtt's client
  librdkafka-dev  # publish.kafka's client (its mock cluster is the tests' Kafka)
  mosquitto mosquitto-clients  # the tests' MQTT broker (on loopback ports of their own) and subscriber
  redis-server redis-tools  # the tests' Redis server (publish.redis; loopback ports of their own) and redis-cli
  libgtest-dev libgmock-dev
  python3 python3-zmq python3-numpy
  python3-fusepy  # the e2e test of a watched folder on a share that stops answering (a FUSE file system)
)
# Only to retrain the shipped model (models/train_pattern_cnn.py) and make the benchmark's ResNet-18.
if [[ "${VAPIPE_SETUP_TRAINING:-0}" == 1 ]]; then PACKAGES+=(python3-torch); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then missing+=("$p"); fi
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) != 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}"
