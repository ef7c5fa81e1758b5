// test_ch14_files.cpp — chapter 14's files, through the program: --save-weights
// holds nanoGPT's names and shapes (written out here from nanoGPT's model.py,
// not read from gpt.cpp) and loads back into the model; --save-data holds the
// training tokens as int64; a --load-weights file of another shape or another
// vocabulary is refused in one sentence (exit 1 or 2), never trained from.
#include "support/catch.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dpt/checkpoint.h"
#include "gpt.h"
#include "support/run_program.h"

using dpt_test::run_program;

namespace {

const std::string kProgram = "ch14_language_model";
// A small GPT: L = 2 blocks, H = 2 heads, C = 32, T = 16.
const std::string kOneRank = "--ranks 1 --quiet --sample 0 --data synthetic --layers 2 --heads 2 --width 32 --context 16 --batch 2";
constexpr int64_t L = 2, C = 32, T = 16;

// nanoGPT's state_dict for a GPT of L blocks, width C, context T, vocabulary V
// (bias=True, untied head, no attention buffer): name → shape.
std::map<std::string, dpt::Shape> nanogpt_names(int64_t V) {
  std::map<std::string, dpt::Shape> names{{"transformer.wte.weight", {V, C}}, {"transformer.wpe.weight", {T, C}},
                                          {"transformer.ln_f.weight", {C}},  {"transformer.ln_f.bias", {C}},
                                          {"lm_head.weight", {V, C}}};
  for (int64_t i = 0; i < L; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    for (const char* ln : {"ln_1", "ln_2"}) names[h + ln + ".weight"] = {C}, names[h + ln + ".bias"] = {C};
    names[h + "attn.c_attn.weight"] = {3 * C, C}, names[h + "attn.c_attn.bias"] = {3 * C};
    names[h + "attn.c_proj.weight"] = {C, C}, names[h + "attn.c_proj.bias"] = {C};
    names[h + "mlp.c_fc.weight"] = {4 * C, C}, names[h + "mlp.c_fc.bias"] = {4 * C};
    names[h + "mlp.c_proj.weight"] = {C, 4 * C}, names[h + "mlp.c_proj.bias"] = {C};
  }
  return names;
}

// Runs the chapter; REQUIREs exit 0 and returns its output.
std::string run_ok(const std::string& args) {
  dpt_test::ProgramResult r = run_program(kProgram, args);
  INFO(kProgram << " " << args << "\n" << r.output);
  REQUIRE(r.exit_code == 0);
  return r.output;
}

// The lines of `text` that hold more than blanks.
std::vector<std::string> nonblank_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  return lines;
}

// A refused --load-weights: exit 1 or 2, one line naming the file and saying `what` (each of them).
void check_refused(const std::string& args, const std::string& file, const std::vector<std::string>& what) {
  dpt_test::ProgramResult r = run_program(kProgram, args);
  INFO(kProgram << " " << args << "\n" << r.output);
  CHECK((r.exit_code == 1 || r.exit_code == 2));
  std::vector<std::string> lines = nonblank_lines(r.output);
  REQUIRE(lines.size() == 1);  // one sentence, no trace, no narration before it
  CHECK(lines[0].find(file) != std::string::npos);
  for (const std::string& w : what) CHECK(lines[0].find(w) != std::string::npos);
  CHECK(r.output.find("terminate") == std::string::npos);
}

}  // namespace

TEST_CASE("ch14 --save-weights holds nanoGPT's names and shapes, and loads back into the model") {
  const std::string weights = dpt_test::temp_path("ch14_weights.safetensors");
  run_ok(kOneRank + " --steps 0 --save-weights " + weights);
  dpt::SafeTensorsFile file = dpt::read_safetensors(weights);
  REQUIRE(file.metadata.count("vocabulary") == 1);
  const int64_t V = int64_t(file.metadata["vocabulary"].size());
  REQUIRE(V > 1);

  std::map<std::string, dpt::Shape> expected = nanogpt_names(V), saved;
  for (const auto& [name, t] : file.tensors) {
    CHECK(t.dtype == dpt::DType::F32);
    saved[name] = t.shape;
  }
  CHECK(saved == expected);

  // The model built for these sizes takes the file: same names, same shapes, the values land.
  dpt::Rng rng(12345);  // another seed: the loaded values must come from the file
  Gpt model({V, T, L, 2, C}, dpt::Device::host(), rng);
  std::map<std::string, dpt::Shape> model_names;
  for (const auto& named : model.named_parameters()) model_names[named.name] = named.tensor.shape();
  CHECK(model_names == expected);
  dpt::load_weights(weights, model.named_parameters());
  for (const auto& named : model.named_parameters()) {
    INFO(named.name);
    CHECK(named.tensor.to_vector() == file.tensors.at(named.name).floats());
  }
  std::remove(weights.c_str());
}

TEST_CASE("ch14 --save-data holds the training tokens: tokens (N,) int64, each inside the vocabulary") {
  const std::string data = dpt_test::temp_path("ch14_data.safetensors");
  const std::string weights = dpt_test::temp_path("ch14_data_weights.safetensors");
  run_ok(kOneRank + " --steps 0 --save-data " + data + " --save-weights " + weights);
  dpt::SafeTensorsFile file = dpt::read_safetensors(data);
  REQUIRE(file.tensors.count("tokens") == 1);
  const dpt::SafeTensor& tokens = file.tensors.at("tokens");
  CHECK(tokens.dtype == dpt::DType::I64);
  REQUIRE(tokens.shape.size() == 1);
  const int64_t V = int64_t(dpt::read_safetensors(weights).metadata.at("vocabulary").size());
  std::vector<int64_t> values = tokens.ints();
  CHECK(int64_t(values.size()) == tokens.shape[0]);
  CHECK(int64_t(values.size()) > T + 1);  // at least one window
  std::set<int64_t> seen(values.begin(), values.end());
  CHECK(*seen.begin() >= 0);
  CHECK(*seen.rbegin() < V);
  CHECK(int64_t(seen.size()) > V / 2);  // text, not a constant: most characters occur
  std::remove(data.c_str());
  std::remove(weights.c_str());
}

TEST_CASE("ch14 refuses --load-weights of another shape in one sentence, exit 1 or 2") {
  const std::string weights = dpt_test::temp_path("ch14_narrow.safetensors");
  run_ok(kOneRank + " --steps 0 --save-weights " + weights);
  // The same model but width 64: every matrix is the wrong shape.
  std::string wider = kOneRank;
  wider.replace(wider.find("--width 32"), 10, "--width 64");
  const std::string V = std::to_string(dpt::read_safetensors(weights).metadata.at("vocabulary").size());
  // Names a tensor, the shape it has and the shape the model wants.
  check_refused(wider + " --steps 1 --load-weights " + weights, weights,
                {"transformer.", "(" + V + ", 32)", "(" + V + ", 64)"});
  std::remove(weights.c_str());
}

TEST_CASE("ch14 refuses --load-weights trained on another vocabulary in one sentence, exit 1 or 2") {
  const std::string weights = dpt_test::temp_path("ch14_vocab.safetensors");
  run_ok(kOneRank + " --steps 0 --save-weights " + weights);
  const std::string vocabulary = dpt::read_safetensors(weights).metadata.at("vocabulary");
  // A text with as many distinct characters, none of them the synthetic text's:
  // the tensors' shapes all match, only the vocabulary tells the files apart.
  std::string others;
  for (char c = '!'; c <= '~' && others.size() < vocabulary.size(); ++c)
    if (vocabulary.find(c) == std::string::npos) others += c;
  REQUIRE(others.size() == vocabulary.size());
  const std::string text = dpt_test::temp_path("ch14_other.txt");
  {
    std::ofstream out(text);
    dpt::Rng rng(5);
    for (int i = 0; i < 4000; ++i) out << others[rng.below(others.size())];
  }
  std::string other_text = kOneRank;
  other_text.replace(other_text.find("--data synthetic"), 16, "--data text:" + text);
  check_refused(other_text + " --steps 1 --load-weights " + weights, weights, {"vocabulary"});
  std::remove(weights.c_str());
  std::remove(text.c_str());
}
