#include "gui/models/scenario_form.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QSaveFile>
#include <QTemporaryFile>
#include <algorithm>

#include "model/error.h"
#include "model/io/load.h"
#include "model/io/parts.h"
#include "model/io/stacks.h"

namespace moeperf::gui {

namespace {

// The built-in software stacks (stacks/*.json), by name.
QStringList stack_names() {
  QStringList out;
  for (const auto& s : io::builtin_stacks()) out << QString::fromStdString(s.first);
  return out;
}

// The shipped calibration profiles (calibration/profiles/*.json), by generation name.
QStringList profile_names() {
  QStringList out;
  for (const auto& p : io::builtin_profiles()) out << QString::fromStdString(p.first);
  return out;
}

QJsonValue at(const QJsonObject& root, const QString& dotted) {
  QJsonValue cur = root;
  for (const QString& part : dotted.split(QLatin1Char('.'))) {
    if (!cur.isObject()) return {};
    cur = cur.toObject().value(part);
  }
  return cur;
}

QString text(const QJsonValue& v) {
  if (v.isBool()) return v.toBool() ? QStringLiteral("true") : QStringLiteral("false");
  if (v.isDouble()) return QString::number(v.toDouble(), 'g', 15);
  if (v.isString()) return v.toString();
  // A layout given per virtual stage: the JSON array, which an edit may give back as it is.
  if (v.isArray()) return QString::fromUtf8(QJsonDocument(v.toArray()).toJson(QJsonDocument::Compact));
  return {};
}

}  // namespace

const std::vector<FormField>& ScenarioForm::fields() {
  using K = FormField::Kind;
  const QStringList dtypes{"bf16", "fp16", "fp8", "fp8_block", "mxfp8", "nvfp4", "fp32"};
  const QStringList flag{"true", "false"};
  static const std::vector<FormField> f = {
      {"model", "Model file", K::text, {}},    // moeperf model JSON or HF config.json, relative to the scenario
      {"system", "System file", K::text, {}},  // topologies/*.json, relative to the scenario
      // Empty: the shipped profile of the system's GPU generation; a name prices the system with
      // another generation's fit (a what-if); a profile file the scenario names shows its path.
      {"calibration", "Calibration profile", K::choice, profile_names()},
      {"gpus", "GPUs", K::integer, {}},
      {"parallelism.tp", "TP", K::integer, {}},
      {"parallelism.ep", "EP", K::integer, {}},
      {"parallelism.fsdp", "FSDP", K::integer, {}},
      {"parallelism.pp", "PP", K::integer, {}},
      {"parallelism.dp", "DP", K::integer, {}},
      {"parallelism.schedule", "Pipeline schedule", K::choice, {"1f1b", "interleaved", "dualpipe", "dualpipev", "zbh1"}},
      // Megatron's layout string, or "balanced" (moeperf evens the stages and shows the split).
      {"parallelism.layout", "Pipeline layout", K::text, {}},
      {"batch.micro_batch", "Micro batch", K::integer, {}},
      {"batch.global_batch", "Global batch", K::integer, {}},
      {"precision.expert_gemm", "Expert GEMM", K::choice, dtypes},
      {"precision.dense_gemm", "Dense GEMM", K::choice, dtypes},
      {"routing.distribution", "Routing", K::choice, {"uniform", "balanced", "zipf", "dirichlet", "histogram"}},
      {"routing.zipf_exponent", "Zipf exponent", K::number, {}},
      {"stack", "Software stack", K::choice, stack_names()},  // a choice replaces the file's stack
      {"stack.grouped_gemm", "Grouped GEMM", K::choice, flag},
      {"stack.grouped_kernel", "Grouped GEMM kernel", K::choice, {"ptr_array", "contiguous", "multi_stream"}},
      {"stack.dispatcher", "Dispatcher", K::choice, {"alltoall", "allgather", "fused_dedup"}},
      {"stack.multistream_collectives", "Multistream collectives", K::choice, flag},
      {"stack.overlap.fsdp_prefetch", "FSDP prefetch", K::choice, flag},
      {"stack.overlap.a2a_with_shared_expert", "A2A with shared expert", K::choice, flag},
      {"stack.overlap.fwd_bwd", "Forward/backward overlap", K::choice, flag},
  };
  return f;
}

QString ScenarioForm::pointer(const QString& dotted) {
  return QLatin1Char('/') + QString(dotted).replace(QLatin1Char('.'), QLatin1Char('/'));
}

bool ScenarioForm::load(const QString& path, QString* error) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) {
    if (error) *error = path + QStringLiteral(": cannot read: ") + f.errorString();
    return false;
  }
  QJsonParseError e{};
  const QJsonDocument d = QJsonDocument::fromJson(f.readAll(), &e);
  if (e.error != QJsonParseError::NoError || !d.isObject()) {
    if (error) *error = path + QStringLiteral(": expected a JSON object: ") + e.errorString();
    return false;
  }
  path_ = path;
  doc_ = d.object();
  edits_.clear();
  return true;
}

QString ScenarioForm::fileValue(const QString& dotted) const {
  const QJsonValue v = at(doc_, dotted);
  // A stack given as {"base": NAME, overrides...} shows its base.
  if (dotted == QLatin1String("stack") && v.isObject()) return text(v.toObject().value(QStringLiteral("base")));
  return text(v);
}

QString ScenarioForm::value(const QString& dotted) const {
  for (const auto& [p, v] : edits_)
    if (p == dotted) return v;
  return fileValue(dotted);
}

void ScenarioForm::setValue(const QString& dotted, const QString& value) {
  std::erase_if(edits_, [&](const auto& e) { return e.first == dotted; });
  const QString v = value.trimmed();
  if (v.isEmpty() || v == fileValue(dotted)) return;
  edits_.emplace_back(dotted, v);
}

QStringList ScenarioForm::overrides() const {
  QStringList out;
  for (const FormField& f : fields())
    for (const auto& [p, v] : edits_)
      if (p == f.path) out << p + QLatin1Char('=') + v;
  // Then the edits of fields the dock does not show (a sweep point's or a plan layout's
  // "memory.recompute", "parallelism.vpp", "system.price...") in the order they were made: they
  // hold for every later prediction, study and save, as the form's own do.
  return out + hiddenOverrides();
}

namespace {
bool shown(const QString& path) {
  const auto& f = ScenarioForm::fields();
  return std::any_of(f.begin(), f.end(), [&](const FormField& x) { return x.path == path; });
}
}  // namespace

QStringList ScenarioForm::hiddenOverrides() const {
  QStringList out;
  for (const auto& [p, v] : edits_)
    if (!shown(p)) out << p + QLatin1Char('=') + v;
  return out;
}

void ScenarioForm::clearHidden() {
  std::erase_if(edits_, [](const auto& e) { return !shown(e.first); });
}

int ScenarioForm::fieldForPointer(const QString& json_pointer) {
  const auto& f = fields();
  // The field with the longest pointer that is the error's or a prefix of it ("/stack/dispatcher"
  // is the dispatcher's, "/stack/cuda_graphs" the stack's).
  int best = -1;
  qsizetype best_len = -1;
  for (size_t i = 0; i < f.size(); ++i) {
    const QString p = pointer(f[i].path);
    if ((json_pointer == p || json_pointer.startsWith(p + QLatin1Char('/'))) && p.size() > best_len) {
      best = static_cast<int>(i);
      best_len = p.size();
    }
  }
  return best;
}

int ScenarioForm::fieldForError(const QString& json_pointer) const {
  if (const int i = fieldForPointer(json_pointer); i >= 0) return i;
  if (json_pointer.isEmpty()) return -1;
  for (auto e = edits_.rbegin(); e != edits_.rend(); ++e)
    if (pointer(e->first).startsWith(json_pointer + QLatin1Char('/'))) return fieldForPointer(pointer(e->first));
  return -1;
}

QString ScenarioForm::derive(const QString& changed) {
  static const QStringList layout = {"gpus", "parallelism.tp", "parallelism.cp", "parallelism.pp", "parallelism.ep",
                                     "parallelism.fsdp", "parallelism.dp"};
  if (free_axis_.isEmpty() || changed == free_axis_ || !layout.contains(changed)) return {};
  // MoE parallel folding (etp given): experts fold into the dense mesh; gpus = tp x cp x pp x dp.
  const bool folded = !value(QStringLiteral("parallelism.etp")).isEmpty();
  if (folded && free_axis_ != QLatin1String("parallelism.dp"))
    return QStringLiteral("FSDP not derived: with etp (MoE parallel folding) the free axis is DP");
  if (folded && (changed == QLatin1String("parallelism.ep") || changed == QLatin1String("parallelism.fsdp"))) return {};
  auto number = [&](const QString& path, bool* ok) -> qlonglong {
    const QString v = value(path);
    if (v.isEmpty()) return path == QLatin1String("gpus") ? (*ok = false, 0) : 1;  // absent: the default, 1
    bool good = false;
    const qlonglong n = v.toLongLong(&good);
    if (!good || n < 1) *ok = false;
    return n;
  };
  bool ok = true;
  const qlonglong gpus = number(QStringLiteral("gpus"), &ok);
  qlonglong rest = 1;
  QStringList names;
  for (const QString& p : layout) {
    if (p == QLatin1String("gpus") || p == free_axis_) continue;
    if (folded && (p == QLatin1String("parallelism.ep") || p == QLatin1String("parallelism.fsdp"))) continue;
    rest *= number(p, &ok);
    names << p.mid(p.indexOf(QLatin1Char('.')) + 1);
    if (!ok || rest > (qlonglong{1} << 40)) return {};  // not a layout yet (typing); the loader will say
  }
  const QString axis = free_axis_.mid(free_axis_.indexOf(QLatin1Char('.')) + 1).toUpper();
  if (gpus % rest != 0)
    return QStringLiteral("%1 not derived: %2 = %3 does not divide %4 GPUs").arg(axis, names.join(QStringLiteral(" x ")))
        .arg(rest)
        .arg(gpus);
  const QString before = value(free_axis_).isEmpty() ? QStringLiteral("1") : value(free_axis_);
  const QString after = QString::number(gpus / rest);
  if (before == after) return {};
  setValue(free_axis_, after);
  return QStringLiteral("%1 %2 → %3 keeps %4 GPUs").arg(axis, before, after).arg(gpus);
}

bool ScenarioForm::save(const QString& out, QString* error) {
  const QDir from = QFileInfo(path_).absoluteDir(), to = QFileInfo(out).absoluteDir();
  QJsonObject doc;
  try {  // never write a scenario moeperf rejects
    std::vector<io::Override> ov;
    for (const QString& o : overrides()) ov.push_back(io::parse_override(o.toStdString(), io::kEditOrigin));
    (void)io::load_scenario(path_.toStdString(), ov);
    // The edits as the loader applies them (a named stack becomes a base, a field of a referenced
    // file brings that file in), its references rewritten for OUT's folder.
    doc = QJsonDocument::fromJson(QByteArray::fromStdString(io::scenario_text_with_overrides(
                                      path_.toStdString(), ov, to.absolutePath().toStdString())))
              .object();
  } catch (const InputError& e) {
    if (error) *error = QStringLiteral("not saved: ") + QString::fromStdString(e.what());
    return false;
  }
  // A stack or end-to-end file beside the scenario follows it too (the loader rewrote the model,
  // system and calibration references); a name that is no file there ("none", a shipped stack's
  // name) stays as it is.
  auto follow = [&](const QString& ref) {
    if (QDir::isAbsolutePath(ref) || !QFileInfo(from.absoluteFilePath(ref)).isFile()) return ref;
    return to.relativeFilePath(from.absoluteFilePath(ref));
  };
  for (const char* key : {"stack", "end_to_end"}) {
    const QJsonValue ref = doc.value(QLatin1String(key));
    if (ref.isString()) {
      doc.insert(QLatin1String(key), follow(ref.toString()));
    } else if (ref.isObject() && ref.toObject().value(QStringLiteral("base")).isString()) {
      QJsonObject o = ref.toObject();
      o.insert(QStringLiteral("base"), follow(o.value(QStringLiteral("base")).toString()));
      doc.insert(QLatin1String(key), o);
    }
  }
  const QByteArray text = QJsonDocument(doc).toJson(QJsonDocument::Indented);
  {
    // Checked again as written, from OUT's folder, before OUT is replaced.
    QTemporaryFile probe(to.filePath(QStringLiteral(".moeperf-save-XXXXXX.json")));
    if (!probe.open() || probe.write(text) != text.size() || !probe.flush()) {
      if (error) *error = out + QStringLiteral(": cannot write: ") + probe.errorString();
      return false;
    }
    try {
      (void)io::load_scenario(probe.fileName().toStdString());
    } catch (const InputError& e) {
      if (error)
        *error = QStringLiteral("not saved: the file written would not load: ") +
                 QString::fromStdString(e.what()).replace(probe.fileName(), out);
      return false;
    }
  }
  QSaveFile f(out);  // writes a temporary beside OUT and renames it on commit()
  if (!f.open(QIODevice::WriteOnly) || f.write(text) < 0 || !f.commit()) {
    if (error) *error = out + QStringLiteral(": cannot write: ") + f.errorString();
    return false;
  }
  return load(out, error);
}

}  // namespace moeperf::gui
