// Minimal Abseil stand-in (see ../strings/string_view.h): a read-only absl::Span.
#ifndef SPARK_TEST_GPU_ABSL_SHIM_TYPES_SPAN_H_
#define SPARK_TEST_GPU_ABSL_SHIM_TYPES_SPAN_H_
#include <cstddef>
#include <initializer_list>
#include <type_traits>
#include <vector>
namespace absl {
template <typename T>
class Span {
 public:
  using value_type = std::remove_cv_t<T>;
  constexpr Span() = default;
  constexpr Span(T* data, size_t size) : data_(data), size_(size) {}
  template <typename A>
  Span(const std::vector<value_type, A>& v) : data_(v.data()), size_(v.size()) {}
  template <typename A>
  Span(std::vector<value_type, A>& v) : data_(v.data()), size_(v.size()) {}
  template <size_t N>
  constexpr Span(T (&a)[N]) : data_(a), size_(N) {}
  Span(std::initializer_list<value_type> l) : data_(l.begin()), size_(l.size()) {}
  constexpr T* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr T& operator[](size_t i) const { return data_[i]; }
  constexpr T* begin() const { return data_; }
  constexpr T* end() const { return data_ + size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};
}  // namespace absl
#endif
