// car_board.cpp - the FNK0053's board inputs (see car_board.h): the robot id
// from car_config.h, no gyro on the kit, no extra telemetry members.
#include "car_board.h"

#include "car_config.h"

static_assert(STIGMESH_ROBOT_ID >= 1 && STIGMESH_ROBOT_ID <= 255, "robot id is 1..255");

uint8_t car_robot_id()
{
    return (uint8_t)STIGMESH_ROBOT_ID;
}

bool car_gyro_z(float *)
{
    return false;  // the FNK0053 has no gyro
}

int car_telemetry_extra(char *, size_t)
{
    return 0;
}
