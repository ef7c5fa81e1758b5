# fashion_mnist_accuracy.cmake — ch01 on Fashion-MNIST reaches a stated test
# accuracy. Run by CTest (tests/data/CMakeLists.txt) as
#   cmake -DBIN_DIR=… -DDATA_DIR=… -DWORK_DIR=… -P fashion_mnist_accuracy.cmake
#
# The run: 784-256-10, all 60,000 training images, 400 steps of 64, momentum,
# lr 0.01, seed 42 (~25,600 samples: under half an epoch). Scored on the
# whole test split (10,000 images) from the metrics JSONL's last line.
#
# The threshold, 0.80, argued: measured 0.837 at seed 42 and 0.822, 0.823,
# 0.832 at seeds 1, 2, 3 (docs/data.md), so seed-to-seed spread is ~1.5
# points; float rounding on another CPU moves it by far less. 0.80 sits two
# points under the worst seed seen. What it catches: a run that does not learn
# (0.10), labels read out of step with images, a test split scored with the
# wrong labels or normalisation — each far below 0.80.
set(threshold 0.80)
foreach(file train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
  if(NOT EXISTS "${DATA_DIR}/${file}.gz" AND NOT EXISTS "${DATA_DIR}/${file}")
    message("fashion_mnist_test_accuracy skipped: ${DATA_DIR}/${file}.gz is missing "
            "(Debian: apt-get install dataset-fashion-mnist; elsewhere: -DDPT_FASHION_MNIST_DIR=DIR)")
    return()
  endif()
endforeach()

set(metrics "${WORK_DIR}/fashion_mnist_ch01.jsonl")
file(REMOVE "${metrics}")
execute_process(COMMAND "${BIN_DIR}/ch01_sgd" --data "fashion-mnist:${DATA_DIR}" --samples 60000 --steps 400
                        --batch 64 --optimizer momentum --lr 0.01 --seed 42 --quiet --metrics "${metrics}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(out MATCHES "not implemented:")
  message("fashion_mnist_test_accuracy skipped: ch01's holes are not written yet (it stops at the first one)")
  return()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ch01_sgd on Fashion-MNIST exited with ${rc}")
endif()
file(STRINGS "${metrics}" lines)
list(GET lines -1 last)
string(JSON accuracy ERROR_VARIABLE problem GET "${last}" test_accuracy)
if(problem)
  message(FATAL_ERROR "the metrics' last line has no test_accuracy (${problem}): ${last}")
endif()
if(accuracy LESS ${threshold})
  message(FATAL_ERROR "Fashion-MNIST test accuracy ${accuracy} is below ${threshold} (measured 0.837 at seed 42)")
endif()
message("Fashion-MNIST test accuracy ${accuracy} >= ${threshold}")
