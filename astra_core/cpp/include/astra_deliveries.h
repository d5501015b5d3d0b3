// A compiled model's deliveries waiting to be made, kept in the queue's token table
// (api->tokens) at the model's own indices (a message slot): the garbage collector
// sees them through the queue, and no call is made per message but when the table
// grows. In namespace astra.

#ifndef ASTRA_DELIVERIES_H
#define ASTRA_DELIVERIES_H

#include <algorithm>

#include "astra_kernel_api.h"

namespace astra {

class Deliveries {
 public:
  Deliveries(const AstraKernelApi* api, PyObject* events, void* model) : api_(api), events_(events), model_(model) {}

  // Keeps ``token`` at ``index`` (>= 0, empty); false with a Python exception set (the
  // token discarded) when the table cannot grow.
  bool put(long long index, AstraToken token) {
    if (index >= capacity_) {
      long long wanted = std::max(index + 1, 2 * capacity_);
      at_ = api_->tokens(events_, model_, wanted);
      capacity_ = at_ == nullptr ? 0 : wanted;
      if (at_ == nullptr) {
        api_->discard(token);
        return false;
      }
    }
    at_[index] = token;
    return true;
  }

  // The token at ``index``, taken out (its entry empty again).
  AstraToken take(long long index) {
    AstraToken token = at_[index];
    at_[index] = AstraToken{};
    return token;
  }

 private:
  const AstraKernelApi* api_;
  PyObject* events_;
  void* model_;
  AstraToken* at_ = nullptr;
  long long capacity_ = 0;
};

}  // namespace astra

#endif
