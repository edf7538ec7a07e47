// The reference helpers moved to tests/common/ref.h (shared by the op cases and the fused tests).
#pragma once

#include "common/ref.h"
