// outputs.cpp — chapter 14's files (outputs.h).
#include "outputs.h"

#include <cmath>
#include <sstream>

#include "dpt/check.h"
#include "dpt/checkpoint.h"
#include "dpt/line_chart.h"
#include "dpt/output_file.h"
#include "dpt/text_corpus.h"

void write_ch14_outputs(const Ch14Flags& f, const Gpt& model, const Corpus& text, const LmRun& run) {
  if (!f.save_weights.empty())
    dpt::save_weights(f.save_weights, model.named_parameters(), dpt::vocabulary_metadata(text.vocabulary));
  if (!f.save_data.empty()) dpt::save_text_data(f.save_data, text.train, text.vocabulary);
  if (!f.metrics.empty()) {
    std::ostringstream out;
    std::size_t e = 0;
    for (std::size_t s = 0; s < run.train_loss.size(); ++s) {
      out << "{\"step\": " << s + 1 << ", \"loss\": " << run.train_loss[s];
      if (e < run.held_out.size() && run.held_out[e].step == int64_t(s + 1))
        out << ", \"held_out_loss\": " << run.held_out[e++].loss;
      out << "}\n";
    }
    dpt::write_output_file(f.metrics, out.str());
  }
  if (!f.plot.empty()) {
    dpt::LineChart chart;
    chart.title = "ch14: " + describe(model.shape()) + ", " + text.name;
    chart.x_label = "step";
    chart.y_label = "loss (nats per character)";
    dpt::ChartSeries train, held, guess;
    train.name = "train (mean over ranks)";
    held.name = "held out", held.colour = "#d0652a", held.markers = true;
    for (std::size_t s = 0; s < run.train_loss.size(); ++s) train.points.push_back({double(s + 1), run.train_loss[s]});
    for (const EvalPoint& p : run.held_out) held.points.push_back({double(p.step), p.loss});
    const double uniform = std::log(double(text.vocab()));
    guess.name = "ln V (uniform guess)", guess.colour = "#999999", guess.dashed = true;
    guess.points = {{1, uniform}, {double(run.train_loss.size()), uniform}};
    chart.series = {train, held, guess};
    dpt::write_output_file(f.plot, dpt::svg(chart));
  }
}

void load_ch14_weights(const std::string& path, Gpt& model, const Corpus& text) {
  const dpt::Vocabulary saved = dpt::read_vocabulary(path);
  DPT_CHECK(saved.characters() == text.vocabulary.characters(),
            path << ": its vocabulary (" << saved.size() << " characters) is not the data's (" << text.vocab()
                 << "): these weights were trained on other text");
  const dpt::SafeTensorsFile file = dpt::read_safetensors(path);
  for (const auto& named : model.named_parameters()) {  // the sizes' flags, not the MLP's --model
    auto found = file.tensors.find(named.name);
    DPT_CHECK(found != file.tensors.end(), path << ": no tensor " << named.name << " (not a GPT saved by ch14 or nanoGPT?)");
    DPT_CHECK(found->second.shape == named.tensor.shape(),
              path << ": " << named.name << " is " << dpt::shape_str(found->second.shape) << ", this model's is "
                   << dpt::shape_str(named.tensor.shape()) << ": saved with other --layers/--heads/--width/--context?");
  }
  dpt::load_weights(path, model.named_parameters());
}
