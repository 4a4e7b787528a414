#!/bin/sh
# The job of mpijob.yaml submitted with Arena, as the JindoFS guide does
# (`arena submit mpi ... --data-dir /mnt/jfs/test:/data/imagenet`): the node's lakecache folder of
# namespace $1 (default test) appears at /data/imagenet in every worker.
#
# Arena's --data-dir is a plain hostPath mount: it cannot ask for HostToContainer propagation, so a
# pod started before the node's mount is up, or one that outlives a FUSE pod restart, sees an empty
# or stale folder. Start training once the fuse pod of the node is Ready; for jobs that must ride
# through a FUSE pod restart, use mpijob.yaml or pytorchjob.yaml, which set HostToContainer.
set -eu
ns=${1:-test}
exec arena submit mpijob \
  --name=imagenet-horovod \
  --workers=2 \
  --gpus=1 \
  --image=horovod/horovod:0.28.1 \
  --data-dir="/mnt/lake/${ns}:/data/imagenet" \
  "python /horovod/examples/pytorch/pytorch_imagenet_resnet50.py --train-dir=/data/imagenet/train --val-dir=/data/imagenet/val"
