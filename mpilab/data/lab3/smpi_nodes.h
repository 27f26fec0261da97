/* smpi_nodes.h — give lab-3 code the simulated cluster's nodes under SMPI.
 *
 * The kit's SimGrid platforms make every core its own simulated host (mpilab.simulate.platforms), and
 * SimGrid 3.32's MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) groups the ranks of one *host*:
 * there every rank gets a communicator of its own, and a node-aware algorithm would see
 * p nodes of one rank. When mpilab builds lab-3 code for SMPI it force-includes this header
 * (smpicc -include smpi_nodes.h) and links smpi_nodes.c, so that the student's unchanged call
 * MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, key, info, &node) groups the ranks whose
 * simulated hosts belong to the same node of the platform instead. Real builds (Open MPI,
 * MPICH) never see this file.
 */
#ifndef MPILAB_SMPI_NODES_H
#define MPILAB_SMPI_NODES_H

#include <mpi.h>

int mpilab_comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                           MPI_Comm *newcomm);

#define MPI_Comm_split_type mpilab_comm_split_type

#endif
