// The op library: every builder, for model definitions.
#pragma once

#include "ops/attention.h"
#include "ops/basic.h"
#include "ops/matmul.h"
#include "ops/moe.h"
#include "ops/parallel.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "ops/softmax.h"
#include "tensor/context.h"
