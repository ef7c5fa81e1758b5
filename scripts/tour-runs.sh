# scripts/tour-runs.sh — the tour's chapter runs, in one place: sourced by
# scripts/tour (every chapter, on simulated devices) and scripts/gpu-check
# (the same runs with --device cuda).
#
#   tour_chapters        the chapters, in tour order
#   tour_ranks[NAME]     the rank flags, as README shows them (01 and 02: one device)
#   tour_text[NAME]      set for a chapter that trains on text (ch14): it takes
#                        its own --data, never the Fashion-MNIST flags below
#   tour_own_data[NAME]  the same for a chapter on its own small data (ch16)
#   tour_fashion[NAME]   steps and rates on Fashion-MNIST, given after
#                        "--data fashion-mnist --samples 60000": measured so each
#                        loss falls from 2.3 to about 0.4 (test accuracy 82-86 %;
#                        docs/data.md). On synthetic data the chapters' defaults.
# shellcheck shell=bash disable=SC2034  # the variables are read where this is sourced
tour_chapters=(ch01_sgd ch02_batching ch03_naive_dp ch04_ring_allreduce ch05_bucketing ch06_averaging
               ch07_zero ch08_collectives ch09_parameter_server ch10_compression ch11_mixed_precision
               ch12_tensor_parallel ch13_pipeline_parallel ch14_language_model ch15_3d_parallel
               ch16_fault_tolerance)
declare -A tour_ranks=(
  [ch03_naive_dp]="--ranks 4"
  [ch04_ring_allreduce]="--ranks 4"
  [ch05_bucketing]="--ranks 4"
  [ch06_averaging]="--ranks 4"
  [ch07_zero]="--ranks 4"
  [ch08_collectives]="--ranks 8 --nodes 2"
  [ch09_parameter_server]="--ranks 5 --servers 1"
  [ch10_compression]="--ranks 4 --plot build/ch10_accuracy_bytes.svg"   # the accuracy-vs-bytes picture
  [ch12_tensor_parallel]="--ranks 4 --tp 2 --dp 2"                      # 2 models, each split over 2 ranks
  [ch13_pipeline_parallel]="--ranks 4 --gantt build/ch13_pipeline.svg"   # the Gantt chart of both schedules
  [ch14_language_model]="--ranks 4 --plot build/ch14_loss.svg"           # the loss curve; 150 steps and a sample
  [ch15_3d_parallel]="--ranks 4 --tp 2 --dp 2"                          # the GPT's blocks split over 2 ranks, 2 copies
  [ch16_fault_tolerance]="--ranks 4"                                     # one crash and one join, planned by default
)
declare -A tour_text=(
  [ch14_language_model]=1   # the King James Bible where installed (--data auto), else synthetic text
  [ch15_3d_parallel]=1      # chapter 14's text flags
)
declare -A tour_own_data=(
  [ch16_fault_tolerance]=1  # its small synthetic set: the lesson is the machinery, and a ledger you can read
)
declare -A tour_fashion=(
  [ch01_sgd]="--steps 1000 --batch 64 --lr 0.1"                      # test ~86 %
  [ch02_batching]="--steps 300 --lr 0.1"                             # K = 32: 9,600 per-sample steps too
  [ch03_naive_dp]="--steps 300 --lr 0.1"                             # global batch 4 x 32
  [ch04_ring_allreduce]="--steps 300 --lr 0.1"
  [ch05_bucketing]="--steps 300 --lr 0.1"
  [ch06_averaging]="--steps 300 --lr 0.1"
  [ch07_zero]="--model 784-256-256-256-10 --steps 300 --lr 0.001"    # Adam, stage 3: test ~83 %
  [ch08_collectives]="--steps 300 --lr 0.1"
  [ch09_parameter_server]="--steps 300 --lr 0.1"
  [ch10_compression]="--steps 300 --lr 0.1"
  [ch11_mixed_precision]="--steps 300"                              # Adam lr 1e-3, 4 settings: test ~81 %
  [ch12_tensor_parallel]="--steps 300 --lr 0.2"                     # 784-256-64-256-10, 2 x 32 per step: test ~80 %
  [ch13_pipeline_parallel]="--steps 300"                            # Adam lr 1e-3, 4 stages x 8 micro-batches: test ~80 %
)
