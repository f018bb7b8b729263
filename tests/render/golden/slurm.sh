#!/bin/sh
# sacctmgr operations for Slurm cluster gpu-east, rendered by the GPU console.
# 'add' of an association that already exists is refused by sacctmgr; the 'modify' lines set the values.
#
# Caveats: what Slurm cannot express of the console's model
# - Slurm has no lend limit: a queue's unused GPUs are shared by fair share and preemption, never
#   reserved (the part of a guarantee that Kueue keeps with lendingLimit is not expressible).
# - Slurm has no guarantee: GrpTRES is only a cap (guarantee + borrow limit). The guarantee is
#   approximated by fairshare (guaranteed GPUs x weight) and by QOS preemption.
# - Limits are enforced only with AccountingStorageEnforce=limits (or safe) in slurm.conf; a job
#   over GrpTRES pends with reason AssocGrpGRES rather than being rejected.
# - AccountingStorageTRES must list gres/gpu and gres/gpu:<type> for every GPU type, or GPUs are
#   neither limited nor accounted.
# - QOS Priority counts only with priority/multifactor and a non-zero PriorityWeightQOS, and it is
#   unrelated to preemption: only the Preempt lists are (PreemptType=preempt/qos). Non-preemptible
#   tiers appear in no Preempt list.
# - PreemptMode=REQUEUE needs JobRequeue=1 or sbatch --requeue. SUSPEND is not used because a
#   suspended job keeps its GPUs (GRES is not released).
# - A tier that never borrows cannot be expressed (Slurm has no borrowing, only the GrpTRES cap);
#   the console's admission enforces it.
# - Typed GPU caps (gres/gpu:<type>) are reliable only for jobs that request a GPU type, as the
#   console's submissions do; the untyped total gres/gpu is capped too when every model of the queue
#   is.
# - When backfill preempts it may preempt more jobs than needed.
# - For this cluster, slurm.conf needs AccountingStorageTRES to include
#   gres/gpu,gres/gpu:h100,gres/gpu:a100,gres/gpu:l40s.
# - Queue nerf/exp: Slurm fairshare weighs a whole queue, not each GPU model; the per-model weights
#   (a100=2, l40s=1) are rendered as their guarantee-weighted mean 1.333.
# - Queue serving/online has no Slurm account on this cluster: nothing is rendered for it.

sacctmgr -i add account product parent=root fairshare=1
sacctmgr -i add account serving parent=product fairshare=1
sacctmgr -i add account research parent=root fairshare=88
sacctmgr -i add account nlp parent=research fairshare=8
sacctmgr -i add account vision parent=research fairshare=36
sacctmgr -i add account vision-3d parent=vision fairshare=12
sacctmgr -i add account nerf parent=vision-3d fairshare=18
sacctmgr -i add account nlp_ft parent=nlp fairshare=8
sacctmgr -i add account vision_train parent=vision fairshare=24
sacctmgr -i add account nerf_exp parent=nerf fairshare=16
sacctmgr -i add qos online-inference
sacctmgr -i add qos periodic
sacctmgr -i add qos training
sacctmgr -i add qos exploratory
sacctmgr -i modify qos online-inference set Priority=1000 Preempt=periodic,training,exploratory PreemptMode=CLUSTER
sacctmgr -i modify qos periodic set Priority=800 Preempt=training,exploratory PreemptMode=REQUEUE
sacctmgr -i modify qos training set Priority=500 Preempt=exploratory PreemptMode=REQUEUE
sacctmgr -i modify qos exploratory set Priority=100 PreemptMode=REQUEUE
sacctmgr -i modify account product set fairshare=1
sacctmgr -i modify account serving set fairshare=1
sacctmgr -i modify account research set fairshare=88
sacctmgr -i modify account nlp set fairshare=8
sacctmgr -i modify account vision set fairshare=36
sacctmgr -i modify account vision-3d set fairshare=12
sacctmgr -i modify account nerf set fairshare=18
sacctmgr -i modify account nlp_ft set fairshare=8 GrpTRES=gres/gpu=8,gres/gpu:h100=8,gres/gpu:a100=0,gres/gpu:l40s=0 QOS=online-inference,periodic,training,exploratory DefaultQOS=exploratory
sacctmgr -i modify account vision_train set fairshare=24 GrpTRES=gres/gpu=-1,gres/gpu:h100=24,gres/gpu:a100=-1,gres/gpu:l40s=0 QOS=online-inference,periodic,training,exploratory DefaultQOS=exploratory
sacctmgr -i modify account nerf_exp set fairshare=16 GrpTRES=gres/gpu=-1,gres/gpu:h100=0,gres/gpu:a100=8,gres/gpu:l40s=-1 QOS=online-inference,periodic,training,exploratory DefaultQOS=exploratory
sacctmgr -i add user dave account=nlp_ft
sacctmgr -i add user erin account=nlp_ft
sacctmgr -i add user alice account=vision_train
sacctmgr -i add user bob account=vision_train
sacctmgr -i add user carol account=nerf_exp
sacctmgr -i modify user where name=carol account=nerf_exp set GrpTRES=gres/gpu:a100=2,gres/gpu:l40s=-1
