// What every rank agreed on at MPI_Init (collectives::start): the cost model and the hosts and
// links to route around. Internal to collectives/ (its tests use it too).
#pragma once

#include "avoid_list/avoid_list.hpp"
#include "collectives/collectives.hpp"
#include "collectives/cost_model.hpp"

namespace commtap::collectives {

struct Agreement {
  CostModel cost_model;         // for automatic, and the forms it tunes
  avoid_list::AvoidList avoid;  // hosts and links to route around (COMMTAP_AVOID_HOSTS)
};

// `context`'s agreement, or the built-in one where none was made (a native job, or before
// start): the built-in cost model, nothing avoided.
const Agreement& agreement_of(const Context& context) noexcept;

}  // namespace commtap::collectives
