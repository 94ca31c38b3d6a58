// The C++ layers hold (the twin of tests/core/test_import_layers.py): every
// #include in csrc stays in its own layer or goes to a layer it declares, and
// the layers' graph has no cycle. The graph is the build's own, read
// from the per-layer targets of tests/cpp/CMakeLists.txt (layer_graph.txt,
// written beside this binary); those targets already fail to compile an
// upward include in the layers built here, and this test extends the check
// to the folders built elsewhere (the faces, fuzz, gpu in a CPU build) and to
// what a compiler cannot see: a climb out of csrc ("../"), a cycle, and a
// layer reaching past what it declares to what that builds on (a face that
// declares only c_api includes no core header, though c_api's targets give
// it core's include path).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace bps {
namespace {

struct LayerGraph {
  std::string csrc;
  std::map<std::string, std::vector<std::string>> depends;  // layer -> what it declares
};

std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// BPS_LAYER_GRAPH overrides where the graph is (a build elsewhere).
bool ReadGraph(LayerGraph* graph, std::string* error) {
  std::string path;
  if (const char* env = getenv("BPS_LAYER_GRAPH")) {
    path = env;
  } else {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
      *error = "cannot find this binary's folder (/proc/self/exe)";
      return false;
    }
    exe[n] = '\0';
    path = Dirname(exe) + "/layer_graph.txt";
  }
  std::ifstream in(path);
  if (!in) {
    *error = path + " is missing: configure tests/cpp with CMake (it writes the layer graph)";
    return false;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.compare(0, 5, "csrc ") == 0) {
      graph->csrc = line.substr(5);
      continue;
    }
    size_t colon = line.find(':');
    if (colon == std::string::npos) {
      *error = path + ": unreadable line '" + line + "'";
      return false;
    }
    std::vector<std::string>& deps = graph->depends[line.substr(0, colon)];
    std::istringstream rest(line.substr(colon + 1));
    for (std::string dep; rest >> dep;) deps.push_back(dep);
  }
  if (graph->csrc.empty() || graph->depends.empty()) {
    *error = path + " names no csrc or no layer";
    return false;
  }
  return true;
}

std::vector<std::string> ListDirectory(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
  }
  return names;
}

bool IsSource(const std::string& name) {
  for (const char* ext : {".h", ".cc", ".cu", ".cuh", ".hpp", ".cpp"}) {
    const size_t n = strlen(ext);
    if (name.size() > n && name.compare(name.size() - n, n, ext) == 0) return true;
  }
  return false;
}

// Files under `dir`, as paths relative to csrc.
void SourcesUnder(const std::string& csrc, const std::string& rel, std::vector<std::string>* out) {
  for (const std::string& name : ListDirectory(csrc + "/" + rel)) {
    const std::string child = rel + "/" + name;
    if (IsDirectory(csrc + "/" + child)) {
      SourcesUnder(csrc, child, out);
    } else if (IsSource(name)) {
      out->push_back(child);
    }
  }
}

struct Include {
  int line;
  std::string path;
  bool quoted;
};

// Every #include line of `file`, "..." and <...>, with its line number.
std::vector<Include> IncludesOf(const std::string& file) {
  std::vector<Include> found;
  std::ifstream in(file);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line[i] != '#') continue;
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string::npos || line.compare(i, 7, "include") != 0) continue;
    i = line.find_first_not_of(" \t", i + 7);
    if (i == std::string::npos || (line[i] != '"' && line[i] != '<')) continue;
    const char close = line[i] == '"' ? '"' : '>';
    const size_t end = line.find(close, i + 1);
    if (end == std::string::npos) continue;
    found.push_back(Include{number, line.substr(i + 1, end - i - 1), close == '"'});
  }
  return found;
}

// What `layer` may include: itself and what it declares.
std::set<std::string> Allowed(const LayerGraph& graph, const std::string& layer) {
  std::set<std::string> allowed{layer};
  auto it = graph.depends.find(layer);
  if (it != graph.depends.end()) allowed.insert(it->second.begin(), it->second.end());
  return allowed;
}

// A cycle of the graph as "a -> b -> a", or empty.
std::string FindCycle(const std::map<std::string, std::vector<std::string>>& edges) {
  std::map<std::string, int> state;  // 0 unseen, 1 on the path, 2 done
  std::vector<std::string> path;
  std::string cycle;
  std::function<bool(const std::string&)> visit = [&](const std::string& node) {
    state[node] = 1;
    path.push_back(node);
    auto it = edges.find(node);
    if (it != edges.end()) {
      for (const std::string& next : it->second) {
        if (state[next] == 1) {
          bool on = false;
          for (const std::string& p : path) {
            on = on || p == next;
            if (on) cycle += p + " -> ";
          }
          cycle += next;
          return true;
        }
        if (state[next] == 0 && visit(next)) return true;
      }
    }
    path.pop_back();
    state[node] = 2;
    return false;
  };
  for (const auto& node : edges) {
    if (state[node.first] == 0 && visit(node.first)) return cycle;
  }
  return "";
}

class LayerGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(ReadGraph(&graph_, &error)) << error;
    ASSERT_TRUE(IsDirectory(graph_.csrc)) << graph_.csrc;
  }
  LayerGraph graph_;
};

TEST_F(LayerGraphTest, DeclaredGraphIsAcyclic) {
  for (const auto& layer : graph_.depends) {
    for (const std::string& dep : layer.second) {
      EXPECT_TRUE(graph_.depends.count(dep)) << "layer " << layer.first << " depends on " << dep
                                             << ", which is no layer";
    }
  }
  const std::string cycle = FindCycle(graph_.depends);
  EXPECT_TRUE(cycle.empty()) << "the layers' graph has a cycle: " << cycle;
}

TEST_F(LayerGraphTest, EveryFolderOfCsrcIsALayer) {
  for (const std::string& name : ListDirectory(graph_.csrc)) {
    if (!IsDirectory(graph_.csrc + "/" + name)) continue;
    EXPECT_TRUE(graph_.depends.count(name))
        << "csrc/" << name << " is in no layer: declare it in tests/cpp/CMakeLists.txt (BPS_LAYERS, and "
        << "BPS_LAYER_" << name << "_DEPENDS: the layers it includes)";
  }
}

// The include rule, for every file of csrc: a layer's header is named from
// csrc ("core/engine.h"), and only by its own layer or one that declares it.
TEST_F(LayerGraphTest, EveryIncludeStaysInItsLayerOrGoesDown) {
  const std::string& csrc = graph_.csrc;
  int checked = 0;
  std::map<std::string, std::vector<std::string>> file_edges;  // header cycles, file by file
  for (const auto& layer : graph_.depends) {
    if (!IsDirectory(csrc + "/" + layer.first)) continue;
    const std::set<std::string> allowed = Allowed(graph_, layer.first);
    std::vector<std::string> files;
    SourcesUnder(csrc, layer.first, &files);
    for (const std::string& file : files) {
      for (const Include& inc : IncludesOf(csrc + "/" + file)) {
        const std::string where = "csrc/" + file + ":" + std::to_string(inc.line) + ": #include " +
                                  (inc.quoted ? "\"" + inc.path + "\"" : "<" + inc.path + ">");
        const size_t slash = inc.path.find('/');
        const std::string top = inc.path.substr(0, slash);
        const bool names_layer = slash != std::string::npos && graph_.depends.count(top) &&
                                 IsFile(csrc + "/" + inc.path);
        if (!inc.quoted && !names_layer) continue;  // a system or framework header (<torch/extension.h>)
        ++checked;
        if (inc.path.find("..") != std::string::npos || inc.path[0] == '/') {
          ADD_FAILURE() << where << ": a path that climbs out of the layer's folder; name the header from "
                        << "csrc (\"layer/file.h\") so the layer rule sees it";
          continue;
        }
        if (!names_layer) {
          // Beside the file, or a framework's header in quotes ("tensorflow/...").
          if (IsFile(csrc + "/" + Dirname(file) + "/" + inc.path)) {
            ADD_FAILURE() << where << ": name the header from csrc (\"" << Dirname(file) << "/" << inc.path
                          << "\"), as every other include does";
          }
          continue;
        }
        if (!allowed.count(top)) {
          ADD_FAILURE() << where << ": layer " << layer.first << " includes layer " << top
                        << ", which it does not declare (tests/cpp/CMakeLists.txt, BPS_LAYER_" << layer.first
                        << "_DEPENDS). If " << top << " is below " << layer.first
                        << ", declare it there; if not, move what both need down, or the caller up";
        }
        file_edges[file].push_back(inc.path);
      }
    }
  }
  EXPECT_GT(checked, 100) << "found almost no includes under " << csrc;
  const std::string cycle = FindCycle(file_edges);
  EXPECT_TRUE(cycle.empty()) << "headers include each other in a cycle: " << cycle;
}

}  // namespace
}  // namespace bps
