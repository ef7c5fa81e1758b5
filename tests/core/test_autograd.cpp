// test_autograd.cpp — the backward sweep's bookkeeping: accumulation, graph
// freeing, and grad-ready hooks firing exactly when a gradient is final.
#include "support/catch.h"

#include "dpt/autograd.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "support/gradcheck.h"

using namespace dpt;

TEST_CASE("a tensor used twice accumulates both gradients", "[autograd]") {
  Tensor x = Tensor::from_vector({3}, {1, 2, 3}, Device::host()).set_requires_grad(true);
  // loss = Σ x·x + Σ 3x  →  d/dx = 2x + 3
  sum(add(mul(x, x), scale(x, 3.0f))).backward();
  CHECK(x.grad().to_vector() == std::vector<float>{5, 7, 9});
}

TEST_CASE("gradients accumulate across backward calls until cleared", "[autograd]") {
  Tensor x = Tensor::from_vector({2}, {1, -1}, Device::host()).set_requires_grad(true);
  sum(scale(x, 2.0f)).backward();
  sum(scale(x, 2.0f)).backward();
  CHECK(x.grad().to_vector() == std::vector<float>{4, 4});
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("two parameters fed by one add get independent gradient storage", "[autograd]") {
  Tensor a = Tensor::zeros({2}, Device::host()).set_requires_grad(true);
  Tensor b = Tensor::zeros({2}, Device::host()).set_requires_grad(true);
  sum(add(a, b)).backward();
  Tensor ga = a.grad();
  fill_(ga, 10.0f);  // an in-place all-reduce on one gradient must not touch the other
  CHECK(b.grad().to_vector() == std::vector<float>{1, 1});
}

TEST_CASE("grad-ready hooks fire once per parameter, last layer first, with the final gradient", "[autograd]") {
  Rng rng(1);
  MLP model({4, 5, 3}, Device::host(), rng);
  Tensor x = dpt_test::random_tensor({2, 4}, rng);
  std::vector<std::string> fired;
  std::vector<std::vector<float>> at_hook;
  auto named = model.named_parameters();
  for (auto& n : named) {
    std::string name = n.name;
    n.tensor.add_grad_ready_hook([&, name](Tensor& p) {
      fired.push_back(name);
      at_hook.push_back(p.grad().to_vector());
    });
  }
  softmax_cross_entropy(model.forward(x), {0, 2}).backward();
  // Backward reaches the last layer first: its weight and bias are final first.
  REQUIRE(fired.size() == 4);
  CHECK((fired[0] == "fc1.weight" || fired[0] == "fc1.bias"));
  CHECK((fired[1] == "fc1.weight" || fired[1] == "fc1.bias"));
  CHECK((fired[2] == "fc0.weight" || fired[2] == "fc0.bias"));
  CHECK((fired[3] == "fc0.weight" || fired[3] == "fc0.bias"));
  for (std::size_t i = 0; i < fired.size(); ++i) {
    for (auto& n : named)
      if (n.name == fired[i]) CHECK(n.tensor.grad().to_vector() == at_hook[i]);  // nothing added later
  }
  for (auto& n : named) n.tensor.clear_grad_ready_hooks();
}

TEST_CASE("a hook on a parameter used twice fires only after both uses", "[autograd]") {
  Tensor w = Tensor::from_vector({2}, {1, 2}, Device::host()).set_requires_grad(true);
  Tensor h = mul(w, w);             // first use (and second, same node)
  Tensor out = sum(add(h, w));      // third use, later in the graph
  int calls = 0;
  std::vector<float> seen;
  w.add_grad_ready_hook([&](Tensor& p) {
    ++calls;
    seen = p.grad().to_vector();
  });
  out.backward();
  CHECK(calls == 1);
  CHECK(seen == std::vector<float>{3, 5});  // 2w + 1
}

TEST_CASE("no graph is recorded under NoGradGuard", "[autograd]") {
  Tensor w = Tensor::from_vector({2}, {1, 2}, Device::host()).set_requires_grad(true);
  {
    NoGradGuard no_grad;
    Tensor y = sum(w);
    CHECK_FALSE(y.requires_grad());
  }
  CHECK(sum(w).requires_grad());
}

TEST_CASE("backward from a non-scalar or a constant is refused clearly", "[autograd]") {
  Tensor w = Tensor::from_vector({2}, {1, 2}, Device::host()).set_requires_grad(true);
  CHECK_THROWS_WITH(scale(w, 2.0f).backward(), contains_text("one-element loss"));
  Tensor c = Tensor::from_vector({2}, {1, 2}, Device::host());
  CHECK_THROWS_WITH(sum(c).backward(), contains_text("does not depend on any tensor that requires grad"));
}

// ----------------------------------------------------------------------------
// backward(output, output_gradient)

TEST_CASE("backward(output, g) gives each leaf Σ g·d output/d leaf, as finite differences say", "[autograd]") {
  Rng rng(7);
  Tensor x = dpt_test::random_tensor({3, 4}, rng, 1.0f, 0.1f).set_requires_grad(true);
  Tensor w = dpt_test::random_tensor({5, 4}, rng).set_requires_grad(true);
  Tensor b = dpt_test::random_tensor({5}, rng).set_requires_grad(true);
  Tensor g = dpt_test::random_tensor({3, 5}, rng);  // d loss / d output, handed in from outside
  auto output = [&] { return relu(linear(x, w, b)); };
  backward(output(), g);
  // The oracle: the scalar Σ g ⊙ output, differentiated by nudging each element (no autograd).
  auto weighted = [&] {
    Tensor y = output();
    double s = 0;
    for (int64_t i = 0; i < y.numel(); ++i) s += double(y.data()[i]) * g.data()[i];
    return Tensor::full({1}, float(s), Device::host());
  };
  for (Tensor* leaf : {&x, &w, &b})
    CHECK(dpt_test::max_relative_error(leaf->grad().to_vector(), dpt_test::numeric_gradient(weighted, *leaf)) < 1e-2);
}

TEST_CASE("backward(output, g) equals backward(sum(output ⊙ g)) bit for bit", "[autograd]") {
  Rng rng(3);
  MLP model({4, 6, 3}, Device::host(), rng);
  Tensor x = dpt_test::random_tensor({5, 4}, rng);
  Tensor g = dpt_test::random_tensor({5, 3}, rng);
  std::vector<std::vector<float>> pushed, summed;
  backward(model.forward(x), g);
  for (Tensor& p : model.parameters()) pushed.push_back(p.grad().to_vector()), p.zero_grad();
  sum(mul(model.forward(x), g)).backward();
  for (Tensor& p : model.parameters()) summed.push_back(p.grad().to_vector());
  CHECK(pushed == summed);
  CHECK(g.requires_grad() == false);  // the gradient handed in is read, not made a graph tensor
}

TEST_CASE("backward(output, g) leaves the caller's g unchanged and fires the hooks", "[autograd]") {
  Tensor a = Tensor::from_vector({3}, {1, 2, 3}, Device::host()).set_requires_grad(true);
  Tensor g = Tensor::from_vector({3}, {0.5f, -1, 2}, Device::host());
  int fired = 0;
  a.add_grad_ready_hook([&](Tensor&) { ++fired; });
  Tensor y = add(scale(a, 1.0f), scale(a, 2.0f));  // dy/da = 3, reached twice
  backward(y, g);
  CHECK(a.grad().to_vector() == std::vector<float>{1.5f, -3, 6});
  CHECK(g.to_vector() == std::vector<float>{0.5f, -1, 2});
  CHECK(fired == 1);
}

TEST_CASE("backward(output, g) refuses a gradient of another shape in a sentence", "[autograd]") {
  Tensor w = Tensor::from_vector({2, 3}, {1, 2, 3, 4, 5, 6}, Device::host()).set_requires_grad(true);
  Tensor y = scale(w, 2.0f);
  CHECK_THROWS_WITH(backward(y, Tensor::zeros({3, 2}, Device::host())),
                    contains_text("the gradient must have the output's shape (2, 3), got (3, 2)"));
  CHECK_THROWS_WITH(backward(scale(Tensor::zeros({2}, Device::host()), 1.0f), Tensor::zeros({2}, Device::host())),
                    contains_text("does not depend on any tensor that requires grad"));
}
