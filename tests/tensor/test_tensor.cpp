// Tensor strides, views without copies, dtype traits.
#include <gtest/gtest.h>

#include "tensor/context.h"

namespace minfer::test {
namespace {

TEST(Tensor, ContiguousStridesAndBytes) {
  Context c;
  Tensor* t = c.new_tensor(DType::F16, {7, 3, 2});
  EXPECT_EQ(t->nb[0], 2u);
  EXPECT_EQ(t->nb[1], 14u);
  EXPECT_EQ(t->nb[2], 42u);
  EXPECT_EQ(t->nbytes(), 84u);
  EXPECT_TRUE(t->is_contiguous());
  Tensor* q = c.new_tensor(DType::Q4_K, {512, 3});
  EXPECT_EQ(q->nb[0], 144u);
  EXPECT_EQ(q->nb[1], 288u);
  EXPECT_EQ(q->nbytes(), 864u);
  EXPECT_EQ(q->n_dims(), 2);
}

TEST(Tensor, ViewsShareStorageWithoutCopies) {
  Context c;
  Tensor* a = c.new_tensor(DType::F32, {4, 6}, "a");
  std::vector<float> buf(24);
  for (int i = 0; i < 24; ++i) buf[static_cast<size_t>(i)] = static_cast<float>(i);
  a->data = buf.data();
  Tensor* r = reshape(c, a, {6, 4});
  EXPECT_EQ(r->data, a->data);
  EXPECT_EQ(r->view_src, a);
  Tensor* tr = transpose(c, a);
  EXPECT_EQ(tr->ne[0], 6);
  EXPECT_EQ(tr->ne[1], 4);
  EXPECT_EQ(tr->nb[0], a->nb[1]);
  EXPECT_FALSE(tr->is_contiguous());
  EXPECT_EQ(*static_cast<float*>(tr->ptr(2, 1)), 9.0f);  // element (row 2, col 1) of a
  Tensor* s = slice(c, a, 1, 2, 3);
  EXPECT_EQ(*static_cast<float*>(s->ptr(1, 0)), 9.0f);
  EXPECT_EQ(s->view_offs, 32u);
  // A view of a view points at the storage root with accumulated offsets.
  Tensor* s2 = slice(c, s, 1, 1, 2);
  EXPECT_EQ(s2->view_src, a);
  EXPECT_EQ(s2->view_offs, 48u);
  Tensor* p = permute(c, c.new_tensor(DType::F32, {2, 3, 4, 5}), 2, 0, 1, 3);
  EXPECT_EQ(p->ne[0], 3);
  EXPECT_EQ(p->ne[1], 4);
  EXPECT_EQ(p->ne[2], 2);
  EXPECT_EQ(p->ne[3], 5);
}

TEST(Tensor, DtypeTraitsAndLookups) {
  EXPECT_EQ(dtype_type_size(DType::Q4_0), 18u);
  EXPECT_EQ(dtype_type_size(DType::Q8_K), 292u);
  EXPECT_EQ(dtype_block_size(DType::Q6_K), 256);
  EXPECT_EQ(dtype_from_id(12), DType::Q4_K);
  EXPECT_FALSE(dtype_from_id(4).has_value());
  EXPECT_FALSE(dtype_from_id(9999).has_value());
  EXPECT_EQ(dtype_from_name("Q4_k"), DType::Q4_K);
  EXPECT_THROW(dtype_row_size(DType::Q8_0, 33), std::invalid_argument);
  EXPECT_THROW(dtype_nbytes(DType::F32, int64_t{1} << 62), std::overflow_error);  // 2^64 bytes
}

}  // namespace
}  // namespace minfer::test
