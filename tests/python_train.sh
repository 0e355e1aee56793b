#!/bin/sh
# The training check, shortened (bench/train/compare.py --check): the CNN on
# 2 ranks, a subset of Fashion-MNIST, one epoch, fixed seed; fp32, head-fp32
# and auto (a calibration run, then route = auto). Asserts identical weights
# on every rank, head-fp32 and auto at most 2 points below fp32, head-fp32's
# upstream traffic at most 6 % of FP32, and that the profile admitted exactly
# the segments whose measured cosine reached the threshold, which then ran
# so. auto SKIPs (in the output) where the library cannot calibrate.
. "${srcdir:-.}/tests/mpi_common.sh"
. "$srcdir/tests/python_common.sh"
py_need numpy mpi4py torch
data=${NF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "SKIP: no Fashion-MNIST in $data (Debian: apt-get install dataset-fashion-mnist)"; exit 77
fi
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
timeout -k 10 "${NF_TEST_TIMEOUT:-300}" "$py" "$top/bench/train/compare.py" --check --no-plot \
  --build "$PWD" --src "$top" --python "$py" --out "$tmp" --np 2 --models cnn \
  --configs fp32,head-fp32,auto --epochs 1 --train-subset 12000 --seed 1 \
  --optimizer sgd --momentum 0 --lr 0.1 --weight-decay 0 --schedule constant \
  --mpirun-args "--mca btl self,vader" $NF_TRAIN_CHECK_ARGS
rc=$?
[ $rc -eq 0 ] || echo "FAILED (exit $rc)"
exit $rc
